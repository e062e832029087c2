"""scripts/param_edges.py against a stand-in vspyre whose answers are set by the value passed."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "param_edges.py")

# One parameter of kind "choice"; each choice makes the stand-in behave one way.
FAKE = textwrap.dedent('''\
    #!/usr/bin/env python3
    import json, os, signal, sys, time
    a = sys.argv[1:]
    if a[0] == "describe":
        print(json.dumps([{"example_path": "card", "parameters": [
            {"name": "mode", "kind": "choice", "choices": %s}]}]))
        sys.exit(0)
    v = a[a.index("-p") + 1].split("=", 1)[1]
    if v == "good":
        print(json.dumps({"kernel_time_us": 12.5})); sys.exit(0)
    if v == "named":
        print("vspyre: error: card.mode: not this one", file=sys.stderr); sys.exit(1)
    if v == "unnamed":
        print("vspyre: error: something failed", file=sys.stderr); sys.exit(1)
    if v == "hang":
        time.sleep(30)
    if v == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if v == "internal":
        print("vspyre: internal error: oops", file=sys.stderr); sys.exit(2)
    if v == "nan":
        print('{"kernel_time_us": NaN}'); sys.exit(0)
    sys.exit(3)
''')


def run(tmp_path, choices):
    fake = tmp_path / "vspyre"
    fake.write_text(FAKE % json.dumps(choices))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    bundle = tmp_path / "b"
    bundle.mkdir()
    out = tmp_path / "runs.jsonl"
    r = subprocess.run([sys.executable, SCRIPT, "--vspyre", str(fake), "--config", str(tmp_path / "c.yaml"),
                        "--fixture", str(bundle), "--timeout", "2", "--jobs", "2", "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    rows = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return r, rows


def test_good_values_and_named_errors_pass(tmp_path):
    r, rows = run(tmp_path, ["good", "named"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "param_edges: 2 runs: error 1, ok 1" in r.stdout
    assert {row["outcome"] for row in rows} == {"ok", "error"}


def test_every_kind_of_failure_is_caught_and_listed(tmp_path):
    r, rows = run(tmp_path, ["good", "unnamed", "hang", "crash", "internal", "nan"])
    assert r.returncode == 1
    outcomes = {row["value"]: row["outcome"] for row in rows}
    assert outcomes == {"good": "ok", "unnamed": "unnamed error", "hang": "hang", "crash": "crash",
                        "internal": "exit 2", "nan": "nonsense"}
    for v in ("unnamed", "hang", "crash", "internal", "nan"):
        assert f"-p card.mode={v} " in r.stdout
