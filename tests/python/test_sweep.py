"""Tests of scripts/vspyre_sweep.py (issue 7: what-if sweeps).

Run with: VSPYRE_BIN=build/dev/cli/vspyre python3 -m pytest -q tests/python
(ctest sets VSPYRE_BIN; without it the newest build/*/cli/vspyre is used).
"""
import csv
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "vspyre_sweep.py"
sys.path.insert(0, str(SCRIPT.parent))
import vspyre_sweep as vs  # noqa: E402

BASE = ROOT / "configs" / "spyre.yaml"
BUNDLES = ROOT / "tests" / "fixtures" / "bundles"


@pytest.fixture(scope="session")
def vspyre():
    try:
        b = vs.find_vspyre()
    except vs.SweepError as e:
        pytest.skip(str(e))
    if not os.path.isfile(b):
        pytest.skip(f"no vspyre binary at {b}")
    return str(Path(b).resolve())


def write_sweep(tmp_path, text, name="s.yaml"):
    f = tmp_path / name
    f.write_text(text.replace("@BASE@", str(BASE)).replace("@BUNDLES@", str(BUNDLES)))
    return f


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def comparable(rows):
    """Rows without what differs between two runs of the same sweep (wall time)."""
    drop = {"elapsed_s"}
    return sorted(({k: v for k, v in r.items() if k not in drop} for r in rows),
                  key=lambda r: (int(r["point"]), r["plan"]))


# --------------------------------------------------------------------------------- axis parsing

def test_axis_list_range_logrange():
    assert vs.axis_values("a", [8, 16, 32]) == [8, 16, 32]
    assert vs.axis_values("a", {"values": ["1MiB", "2MiB"]}) == ["1MiB", "2MiB"]
    assert vs.axis_values("a", {"range": [4, 16, 4]}) == [4, 8, 12, 16]
    assert vs.axis_values("a", {"range": {"start": 1, "stop": 3}}) == [1, 2, 3]
    assert vs.axis_values("a", {"range": [0.5, 1.5, 0.5]}) == [0.5, 1, 1.5]
    assert vs.axis_values("a", {"range": [10, 4, -3]}) == [10, 7, 4]
    assert vs.axis_values("a", {"logrange": [1, 64]}) == [1, 2, 4, 8, 16, 32, 64]
    assert vs.axis_values("a", {"logrange": [1, 100], "base": 10}) == [1, 10, 100]
    assert vs.axis_values("a", {"logrange": {"start": 1, "stop": 1000, "num": 4}}) == \
        [1, 10, 100, 1000]
    assert vs.axis_values("a", {"logrange": [1, 4], "unit": "MiB"}) == ["1MiB", "2MiB", "4MiB"]
    assert vs.axis_values("a", {"range": [1, 2], "unit": "GHz"}) == ["1GHz", "2GHz"]


def test_axis_empty_and_malformed():
    for bad in ([], {"values": []}, {"range": [5, 1]}, {"logrange": [8, 4]}):
        with pytest.raises(vs.SweepError, match="is empty"):
            vs.axis_values("card.core.count", bad)
    with pytest.raises(vs.SweepError, match="step must not be 0"):
        vs.axis_values("a", {"range": [1, 5, 0]})
    with pytest.raises(vs.SweepError):
        vs.axis_values("a", {"range": [1, 5], "logrange": [1, 4]})
    with pytest.raises(vs.SweepError):
        vs.axis_values("a", 7)


def test_cross_and_zip():
    axes = {"a": [1, 2], "b": ["x", "y", "z"]}
    pts = vs.expand_points(axes)
    assert len(pts) == 6 and pts[0] == {"a": 1, "b": "x"} and pts[-1] == {"a": 2, "b": "z"}
    with pytest.raises(vs.SweepError, match="same length"):
        vs.expand_points(axes, "zip")
    axes = {"a": [1, 2], "b": [3, 4], "c": [5, 6, 7]}
    assert vs.expand_points({"a": [1, 2], "b": [3, 4]}, "zip") == \
        [{"a": 1, "b": 3}, {"a": 2, "b": 4}]
    pts = vs.expand_points(axes, "cross", [["a", "b"]])
    assert len(pts) == 6
    assert {(p["a"], p["b"]) for p in pts} == {(1, 3), (2, 4)}
    with pytest.raises(vs.SweepError, match="not an axis"):
        vs.expand_points(axes, "cross", [["a", "nope"]])
    assert vs.expand_points({}) == [{}]


def test_axis_and_point_counts_are_capped_before_they_are_built():
    # A logrange's num had no limit (num: 100000000 hung), and three range axes of 1000 x 1000 x
    # 200 values built 200 million points in memory before anything said no.
    t0 = time.time()
    with pytest.raises(vs.SweepError, match=r"logrange num is 100000000, more than the limit of 100000"):
        vs.axis_values("card.core.lx.size", {"logrange": [1, 4], "num": 100000000, "unit": "MiB"})
    for bad in (float("inf"), float("nan")):
        with pytest.raises(vs.SweepError, match="must be a finite number"):
            vs.axis_values("a", {"logrange": [1, 4], "num": bad})
    assert len(vs.axis_values("a", {"logrange": [1, 4], "num": 100000})) > 1  # the limit itself is fine
    axes = {"a": list(range(1000)), "b": list(range(1000)), "c": list(range(200))}
    with pytest.raises(vs.SweepError, match=r"would have 200000000 points \(1000 x 1000 x 200\), "
                                            r"more than the limit of 100000"):
        vs.expand_points(axes)
    assert time.time() - t0 < 20
    # Zipped axes count once.
    assert len(vs.expand_points({"a": list(range(1000)), "b": list(range(1000))}, "zip")) == 1000
    # Points x plans x seeds: the runs are capped too, before their keys are computed.
    sw = {"path": Path("s.yaml"), "points": [{}] * 100000, "seeds": list(range(11)),
          "plans": [{"kind": "probe", "name": "probe:pt", "probe": "pt"}]}
    with pytest.raises(vs.SweepError, match=r"s.yaml: the sweep would make 1100000 runs \(100000 points x 1 plans "
                                            r"x 11 seeds\), more than the limit of 1000000"):
        vs.make_tasks(sw, "vspyre")


def test_too_many_points_is_a_sweep_file_error(tmp_path):
    # Through the script: exit 2 with the file's name, at once, with no binary run.
    f = write_sweep(tmp_path, """
axes:
  card.core.pt.pass_overhead: {range: [1, 1000]}
  card.core.count: {range: [1, 1000]}
  sim.quantum: {range: [1, 200]}
plans: [probe:pt]
""")
    r = subprocess.run([sys.executable, str(SCRIPT), str(f), "--vspyre", sys.executable, "--list"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr == (f"vspyre sweep: error: {f}: the sweep would have 200000000 points (1000 x 1000 x 200), "
                        "more than the limit of 100000\n")


def test_bad_sweep_files_are_one_line_errors_with_exit_2(tmp_path):
    # Each ended in a Python traceback with exit 1 (UnicodeDecodeError, a YAML error, ValueError),
    # was accepted (timeout: -1 failed every point, "timed out after -1 s"; jobs: 0 or -2 were
    # replaced by all cores while --jobs 0 was refused; a key given twice kept the last one), or
    # was misnamed (a base that is a directory "does not exist"). All stop before the binary runs:
    # the stand-in is no vspyre at all.
    (tmp_path / "syntax.yaml").write_text("card:\n  core: [1, 2\n")
    (tmp_path / "binary.yaml").write_bytes(b"card: \xff\xfe\x00garbage\n")
    (tmp_path / "dup_base.yaml").write_text("card:\n  core:\n    count: 8\n    count: 16\n")
    (tmp_path / "adir").mkdir()
    head = "plans: [probe:pt]\naxes: {card.core.count: [8]}\n"
    cases = [
        ("utf8.yaml", b"axes: {card.core.count: [8]}\n\xf9\x80junk\n", "sweep file {d}/utf8.yaml: not a UTF-8 text file"),
        ("base_syntax.yaml", "base: syntax.yaml\n" + head, "{d}/syntax.yaml:3:1: expected ',' or ']'"),
        ("base_binary.yaml", "base: binary.yaml\n" + head, "base config {d}/binary.yaml: not a UTF-8 text file"),
        ("base_dup.yaml", "base: dup_base.yaml\n" + head, "base config {d}/dup_base.yaml:4:5: duplicate key 'count'"),
        ("base_dir.yaml", "base: adir\n" + head, "base config {d}/adir is a directory, expected a config file"),
        ("t_abc.yaml", head + "timeout: abc\n", "timeout: expected a number of seconds per run, more than 0"),
        ("t_neg.yaml", head + "timeout: -1\n", "timeout: expected a number of seconds per run, more than 0 and at most 1e6, found -1"),
        ("t_nan.yaml", head + "timeout: .nan\n", "timeout: expected a number"),
        ("j_abc.yaml", head + "jobs: abc\n", "jobs: expected a whole number of runs at once, 1 or more, found 'abc'"),
        ("j_0.yaml", head + "jobs: 0\n", "jobs: expected a whole number of runs at once, 1 or more, found 0"),
        ("j_neg.yaml", head + "jobs: -2\n", "found -2"),
        ("j_frac.yaml", head + "jobs: 2.5\n", "found 2.5"),
        ("dup.yaml", head + "axes: {card.core.count: [16]}\n", "sweep file {d}/dup.yaml:3:1: duplicate key 'axes'"),
        ("dup_axis.yaml", "plans: [probe:pt]\naxes:\n  card.core.count: [8]\n  card.core.count: [16]\n",
         "dup_axis.yaml:4:3: duplicate key 'card.core.count'"),
    ]
    for name, text, words in cases:
        f = tmp_path / name
        f.write_bytes(text if isinstance(text, bytes) else text.encode())
        for extra in (["--list"], ["--out", str(tmp_path / "out")]):
            r = subprocess.run([sys.executable, str(SCRIPT), str(f), "--vspyre", sys.executable] + extra,
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 2, (name, r.stderr)
            assert r.stderr.startswith("vspyre sweep: error: ") and "Traceback" not in r.stderr, (name, r.stderr)
            assert words.format(d=tmp_path) in r.stderr, (name, r.stderr)
            assert len(r.stderr.strip().splitlines()) == 1, (name, r.stderr)
            assert not (tmp_path / "out").exists(), name
    # A sweep file that is a directory or is missing says so.
    for f, words in ((tmp_path / "adir", "is a directory"), (tmp_path / "none.yaml", "does not exist")):
        r = subprocess.run([sys.executable, str(SCRIPT), str(f), "--vspyre", sys.executable, "--list"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and f"sweep file {f} {words}" in r.stderr, r.stderr


# --------------------------------------------------------------------- errors before starting

def test_unknown_axis_key_stops_before_start(tmp_path, vspyre):
    f = write_sweep(tmp_path, """
base: @BASE@
axes:
  card.core.cuont: [8, 16]
plans: [probe:pt]
""")
    with pytest.raises(vs.SweepError, match=r"unknown axis key 'card.core.cuont'.*did you mean "
                                            r"'card.core.count'"):
        vs.load_sweep(f, vspyre)
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, str(SCRIPT), str(f), "--vspyre", vspyre, "--out",
                        str(out)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "did you mean 'card.core.count'" in r.stderr
    assert not out.exists(), "nothing may run when the sweep file is bad"


def test_empty_axis_stops_before_start(tmp_path, vspyre):
    f = write_sweep(tmp_path, """
base: @BASE@
axes:
  card.core.count: []
plans: [probe:pt]
""")
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, str(SCRIPT), str(f), "--vspyre", vspyre, "--out",
                        str(out)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "axis 'card.core.count' is empty" in r.stderr
    assert not out.exists()


def test_known_keys_cover_describe_and_config(vspyre):
    keys = vs.known_keys(vspyre, BASE)
    for k in ("card.core.count", "card.core.lx.size", "card.memory.data_rate_mtps",
              "card.memory.channels", "card.ring.width", "card.host_link.gen", "sim.quantum"):
        assert k in keys, k


def test_bad_plan_stops_before_start(tmp_path, vspyre):
    f = write_sweep(tmp_path, """
base: @BASE@
axes: {card.core.count: [8]}
plans: [probe:nope]
""")
    with pytest.raises(vs.SweepError, match="unknown probe"):
        vs.load_sweep(f, vspyre)
    f = write_sweep(tmp_path, """
base: @BASE@
axes: {card.core.count: [8]}
plans: ["@BUNDLES@/no_such_*"]
""")
    with pytest.raises(vs.SweepError, match="matches no bundle"):
        vs.load_sweep(f, vspyre)


def test_ref_bundle_is_a_plan_and_its_target_is_hashed(tmp_path, vspyre):
    """A directory holding bundle.mlir.ref in place of bundle.mlir is a bundle plan, and the
    point key changes with the launch text the ref names, not only with the ref's own bytes."""
    src = BUNDLES / "add_2048x1024_c32"
    launch = tmp_path / "launch"
    launch.mkdir()
    shutil.copyfile(src / "bundle.mlir", launch / "bundle.mlir")
    kdir = tmp_path / "kern"
    kdir.mkdir()
    for f in src.glob("sdsc_*.json"):
        shutil.copyfile(f, kdir / f.name)
    (kdir / "bundle.mlir.ref").write_text("# elsewhere\n../launch/bundle.mlir\n")
    f = write_sweep(tmp_path, f"""
base: @BASE@
axes: {{card.core.count: [8]}}
plans: ["{kdir}"]
""")
    sweep = vs.load_sweep(f, vspyre)
    plans = [p for p in sweep["plans"] if p["kind"] == "bundle"]
    assert [p["name"] for p in plans] == ["kern"]
    before = vs.plan_identity(plans[0])
    (launch / "bundle.mlir").write_text((launch / "bundle.mlir").read_text() + "\n")
    assert vs.plan_identity(plans[0]) != before


# --------------------------------------------------------------------------------- running

SMALL = """
base: @BASE@
axes:
  card.core.pt.pass_overhead: [4, 6]
  card.core.lx.size: [1MiB, 2MiB]
plans:
  - probe:pt
  - @BUNDLES@/softmax_512x1024_lx_input_4core
outputs: [csv, parquet, plots]
"""


def test_local_run_resume(tmp_path, vspyre):
    f = write_sweep(tmp_path, SMALL)
    out = tmp_path / "out"
    r = vs.run_sweep(f, vspyre=vspyre, out=out, jobs=2, quiet=True)
    assert r["total"] == 8 and r["failed"] == 0 and r["skipped"] == 0
    rows = read_csv(out / "results.csv")
    assert len(rows) == 8
    for row in rows:
        assert row["status"] == "ok", row["error"]
        assert float(row["kernel_time_us"]) > 0
        assert row["card.core.lx.size"] in ("1MiB", "2MiB")
        assert "card.core_0.macs" in row
    pt = {row["card.core.pt.pass_overhead"]: float(row["kernel_time_us"])
          for row in rows if row["plan"] == "probe:pt"}
    assert pt["4"] < pt["6"], "a smaller PT pass overhead must make the tile faster"
    bundle = [row for row in rows if row["plan"] != "probe:pt"]
    assert all(float(row["run.cores_used"]) == 4 for row in bundle)
    assert (out / "results.parquet").exists() or not _has("pyarrow")
    if _has("matplotlib"):
        pngs = sorted(p.name for p in (out / "plots").glob("*.png"))
        assert "probe_pt__card.core.pt.pass_overhead.png" in pngs
        assert "softmax_512x1024_lx_input_4core__heatmap.png" in pngs
    # Each point keeps its stats and resolved config.
    keys = {row["key"] for row in rows}
    for k in keys:
        assert (out / "points" / k / "stats.json").exists()
        assert (out / "points" / k / "config.resolved.yaml").exists()

    # A rerun runs nothing and gives the same table.
    r2 = vs.run_sweep(f, vspyre=vspyre, out=out, jobs=2, quiet=True)
    assert r2["skipped"] == 8
    assert comparable(read_csv(out / "results.csv")) == comparable(rows)

    # An interrupted sweep: what finished is kept, only the rest runs again.
    shutil.rmtree(out / "points" / rows[0]["key"])
    (out / "points" / rows[3]["key"] / "result.json").unlink()
    r3 = vs.run_sweep(f, vspyre=vspyre, out=out, jobs=2, quiet=True)
    assert r3["skipped"] == 6 and r3["failed"] == 0
    assert comparable(read_csv(out / "results.csv")) == comparable(rows)

    # Growing the sweep file runs only the new points (the folder's own sweep file, edited).
    grown = SMALL.replace("[4, 6]", "[4, 6, 8]")
    f.write_text(grown.replace("@BASE@", str(BASE)).replace("@BUNDLES@", str(BUNDLES)))
    r4 = vs.run_sweep(f, vspyre=vspyre, out=out, jobs=2, quiet=True)
    assert r4["total"] == 12 and r4["skipped"] == 8
    assert (out / "sweep.yaml").read_text() == f.read_text()
    # Another sweep file into the folder is refused without --replace, which reuses the shared runs.
    f2 = write_sweep(tmp_path, grown.replace("[4, 6, 8]", "[4, 6, 8, 10]"), "s2.yaml")
    with pytest.raises(vs.SweepError, match="holds the results of another sweep"):
        vs.run_sweep(f2, vspyre=vspyre, out=out, jobs=2, quiet=True)
    r5 = vs.run_sweep(f2, vspyre=vspyre, out=out, jobs=2, quiet=True, replace=True)
    assert r5["total"] == 16 and r5["skipped"] == 12
    assert (out / "sweep.yaml").read_text() == f2.read_text()


def test_failed_points_are_rows(tmp_path, vspyre):
    f = write_sweep(tmp_path, """
base: @BASE@
axes:
  card.core.count: [8, 32, lots]
plans:
  - probe:pt
  - @BUNDLES@/mm_2048x512x2048_c32
outputs: [csv]
""")
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, str(SCRIPT), str(f), "--vspyre", vspyre, "--out",
                        str(out), "--jobs", "2"], capture_output=True, text=True, timeout=120)
    # The results are written, and the exit status says that not every point ran (1; a sweep
    # file's error is 2).
    assert r.returncode == 1, r.stderr
    assert "failed" in r.stderr  # plain progress lines (not a terminal)
    rows = {(row["card.core.count"], row["plan"]): row for row in read_csv(out / "results.csv")}
    assert len(rows) == 6
    assert rows[("8", "probe:pt")]["status"] == "ok"
    assert rows[("32", "mm_2048x512x2048_c32")]["status"] == "ok"
    # The plan fails on a card with too few cores ...
    bad = rows[("8", "mm_2048x512x2048_c32")]
    assert bad["status"] == "failed" and "exceeds" in bad["error"] and bad["kernel_time_us"] == ""
    # ... and an invalid config fails every plan of its point, with vspyre's message.
    for plan in ("probe:pt", "mm_2048x512x2048_c32"):
        bad = rows[("lots", plan)]
        assert bad["status"] == "failed" and "card.core.count" in bad["error"], bad["error"]
    # A rerun keeps the failures without running them again; --retry-failed reruns them.
    r2 = vs.run_sweep(f, vspyre=vspyre, out=out, jobs=2, quiet=True)
    assert r2["skipped"] == 6 and r2["failed"] == 3
    r3 = vs.run_sweep(f, vspyre=vspyre, out=out, jobs=2, quiet=True, retry_failed=True)
    assert r3["skipped"] == 3 and r3["failed"] == 3
    # The summary says what the rows are and what this run did ("6/6 done (3 failed, 6 skipped)").
    r4 = subprocess.run([sys.executable, str(SCRIPT), str(f), "--vspyre", vspyre, "--out", str(out)],
                        capture_output=True, text=True, timeout=120)
    assert r4.returncode == 1, r4.stderr  # failures kept from before still count
    assert ("6 of 6 rows, 3 ok and 3 failed; 0 run now, 6 kept from an earlier run (3 of them failed: "
            "--retry-failed runs them again)") in r4.stderr, r4.stderr


def test_bad_out_and_scheduler_are_one_line_errors(tmp_path, vspyre):
    # Both ended in a Python traceback (FileExistsError, ValueError).
    f = write_sweep(tmp_path, """
base: @BASE@
axes:
  card.core.count: [8]
plans: [probe:pt]
outputs: [csv]
""")
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    for args, msg in (
            (["--out", str(afile)], f"vspyre sweep: error: --out: {afile} exists and is not a directory"),
            (["--out", str(afile / "sub")], "vspyre sweep: error: --out: cannot create"),
            (["--scheduler", "http://host:8786"], "vspyre sweep: error: --scheduler: expected a Dask scheduler address"),
            (["--scheduler", "notaurl"], "vspyre sweep: error: --scheduler: expected a Dask scheduler address"),
            (["--scheduler", "tcp://host:abc"], "got 'tcp://host:abc'")):
        r = subprocess.run([sys.executable, str(SCRIPT), str(f), "--vspyre", vspyre, "--out", str(tmp_path / "o")] + args,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 2, r.stderr
        assert msg in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert afile.read_text() == "keep me"
    for good in ("tcp://127.0.0.1:8786", "tls://sched.example:8786", "localhost:8786",
                 "127.0.0.1:8786", "inproc://10.0.0.1/1234/1"):
        vs.check_scheduler(good)
    for bad in ("", "notaurl:", "notaurl", "tcp://host", "http://host:8786", "tcp://:8786", "host:0", "two words"):
        with pytest.raises(vs.SweepError):
            vs.check_scheduler(bad)


def test_outputs_may_name_one_kind_as_a_string(tmp_path, vspyre):
    # `outputs: csv` was read letter by letter ("unknown output(s) ['c', 's', 'v']").
    f = write_sweep(tmp_path, "base: @BASE@\naxes: {card.core.pt.pass_overhead: [4]}\nplans: [probe:pt]\n"
                    "outputs: plots\n")
    assert vs.load_sweep(f, vspyre)["outputs"] == {"csv", "plots"}


def test_example_sweeps_parse(vspyre):
    for f in sorted((ROOT / "configs" / "sweeps").glob("*.yaml")):
        sw = vs.load_sweep(f, vspyre)
        assert sw["points"] and sw["plans"], f
    sw = vs.load_sweep(ROOT / "configs" / "sweeps" / "cores_x_lx.yaml", vspyre)
    assert len(sw["points"]) == 12
    # Every plan of the shipped example runs on every point (one compiled for 32 cores made six
    # failed rows on the 8- and 16-core cards).
    assert all("c32" not in p["name"] for p in sw["plans"]), sw["plans"]
    assert sw["axes"]["card.core.lx.size"] == ["1MiB", "2MiB", "4MiB"]


# ------------------------------------------------------------------- the output directory

STAND_IN = """#!{py}
import json, os, sys
a = sys.argv[1:]
if a[0] == "describe":
    print("[]"); sys.exit(0)
out = a[a.index("--out") + 1]
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "stats.json"), "w") as f:
    json.dump({{"probe": {{"time_us": 1.5}}, "stats": {{}}}}, f)
"""


@pytest.fixture
def stand_in(tmp_path):
    """A stand-in vspyre (describe lists nothing; a probe writes stats.json) and a base config
    with the one key card.core.count: sweeps that run without a build."""
    exe = tmp_path / "stand_in_vspyre"
    exe.write_text(STAND_IN.format(py=sys.executable))
    exe.chmod(0o755)
    (tmp_path / "base.yaml").write_text("card:\n  core:\n    count: 8\n")
    return str(exe)


def sweep_text(counts, outputs="[csv]", name=None):
    return (f"base: base.yaml\naxes: {{card.core.count: {counts}}}\nplans: [probe:pt]\noutputs: {outputs}\n"
            + (f"name: {name}\n" if name else ""))


def run_script(args, exe, cwd=None):
    return subprocess.run([sys.executable, str(SCRIPT)] + [str(a) for a in args] + ["--vspyre", exe, "--jobs", "2"],
                          capture_output=True, text=True, timeout=120, cwd=cwd)


def test_the_users_sweep_yaml_in_out_is_never_overwritten(tmp_path, stand_in):
    # `vspyre sweep my/a.yaml --out my` replaced the user's own my/sweep.yaml with a copy of a.yaml,
    # and when the sweep file was my/sweep.yaml itself the copy died ("... are the same file").
    my = tmp_path / "my"
    my.mkdir()
    (my / "base.yaml").write_text("card:\n  core:\n    count: 8\n")
    mine = sweep_text("[8, 16]")
    (my / "sweep.yaml").write_text(mine)
    (my / "a.yaml").write_text(sweep_text("[4]"))
    for extra in ([], ["--replace"]):
        r = run_script([my / "a.yaml", "--out", my] + extra, stand_in)
        assert r.returncode == 2, r.stderr
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert (f"holds the results of another sweep ({my / 'sweep.yaml'} differs from {my / 'a.yaml'})" in r.stderr
                if not extra else "was not written by vspyre sweep" in r.stderr), r.stderr
        assert (my / "sweep.yaml").read_text() == mine
        assert not (my / "results.csv").exists() and not (my / "points").exists()
    # The folder's own sweep.yaml as the sweep file: runs, is not copied onto itself, and resumes.
    r = run_script([my / "sweep.yaml", "--out", my], stand_in)
    assert r.returncode == 0, r.stderr
    assert (my / "sweep.yaml").read_text() == mine and len(read_csv(my / "results.csv")) == 2
    r = run_script([my / "sweep.yaml", "--out", my], stand_in)
    assert r.returncode == 0 and "0 run now, 2 kept from an earlier run" in r.stderr, r.stderr
    # ... and stays the user's: another sweep with --replace still does not overwrite it.
    r = run_script([my / "a.yaml", "--out", my, "--replace"], stand_in)
    assert r.returncode == 2 and "was not written by vspyre sweep" in r.stderr, r.stderr
    assert (my / "sweep.yaml").read_text() == mine and len(read_csv(my / "results.csv")) == 2


def test_another_sweep_into_the_same_out_is_refused_without_replace(tmp_path, stand_in):
    # A second, different sweep into the same --out replaced results.csv without a word and left
    # the first sweep's results.parquet and plots/ next to it.
    a = tmp_path / "a.yaml"
    a.write_text(sweep_text("[8, 16]", "[csv, parquet, plots]"))
    b = tmp_path / "b.yaml"
    b.write_text(sweep_text("[16, 32, 64]"))
    out = tmp_path / "out"
    r = run_script([a, "--out", out], stand_in)
    assert r.returncode == 0, r.stderr
    first = (out / "results.csv").read_text()
    # What the first sweep wrote with pyarrow and matplotlib (whether or not they are installed here).
    (out / "plots").mkdir(exist_ok=True)
    (out / "plots" / "probe_pt__card.core.count.png").write_bytes(b"png")
    (out / "results.parquet").write_bytes(b"parquet")
    # The same sweep again resumes (the feature kept from before).
    r = run_script([a, "--out", out], stand_in)
    assert r.returncode == 0 and "0 run now, 2 kept from an earlier run" in r.stderr, r.stderr
    (out / "plots").mkdir(exist_ok=True)
    (out / "plots" / "probe_pt__card.core.count.png").write_bytes(b"png")
    (out / "results.parquet").write_bytes(b"parquet")
    # Another sweep: refused before anything is written.
    r = run_script([b, "--out", out], stand_in)
    assert r.returncode == 2, r.stderr
    assert f"--out: {out} holds the results of another sweep ({out / 'sweep.yaml'} differs from {b}); " \
           "use another --out (or name:), or pass --replace" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert (out / "results.csv").read_text() == first and (out / "sweep.yaml").read_text() == a.read_text()
    # --replace: this sweep's results only (the run they share, 16, is reused), no stale outputs.
    r = run_script([b, "--out", out, "--replace"], stand_in)
    assert r.returncode == 0, r.stderr
    assert "2 run now, 1 kept from an earlier run" in r.stderr, r.stderr
    assert [row["card.core.count"] for row in read_csv(out / "results.csv")] == ["16", "32", "64"]
    assert (out / "sweep.yaml").read_text() == b.read_text()
    assert not (out / "results.parquet").exists() and not (out / "plots").exists()
    # A folder with results but no sweep.yaml is not taken for a sweep's either.
    (out / "sweep.yaml").unlink()
    r = run_script([a, "--out", out], stand_in)
    assert r.returncode == 2 and "holds results.csv, points but no sweep.yaml" in r.stderr, r.stderr
    # --list writes nothing and checks nothing.
    assert run_script([b, "--out", out, "--list"], stand_in).returncode == 0


def test_two_sweeps_of_one_name_do_not_share_the_default_out(tmp_path, stand_in):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "base.yaml").write_text("card:\n  core:\n    count: 8\n")
    a = tmp_path / "a.yaml"
    a.write_text(sweep_text("[8]", name="study"))
    b = tmp_path / "x" / "b.yaml"
    b.write_text(sweep_text("[16]", name="study"))
    assert run_script([a], stand_in, cwd=tmp_path).returncode == 0
    r = run_script([b], stand_in, cwd=tmp_path)
    assert r.returncode == 2 and "sweeps/study holds the results of another sweep" in r.stderr, r.stderr
    assert [row["card.core.count"] for row in read_csv(tmp_path / "sweeps" / "study" / "results.csv")] == ["8"]


# ------------------------------------------------------------------------------------ Dask

def _has(mod):
    try:
        __import__(mod)
        return True
    except ImportError:
        return False


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(procs):
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.time() + 10
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)


@pytest.mark.skipif(not _has("distributed"), reason="dask.distributed is not installed")
def test_dask_cluster_matches_local(tmp_path, vspyre):
    from distributed import Client
    f = write_sweep(tmp_path, SMALL.replace("[csv, parquet, plots]", "[csv]"))
    local = tmp_path / "local"
    vs.run_sweep(f, vspyre=vspyre, out=local, jobs=2, quiet=True)

    port = _free_port()
    addr = f"tcp://127.0.0.1:{port}"
    env = dict(os.environ, DASK_DISTRIBUTED__WORKER__DAEMON="False")
    logs = tmp_path / "dask-logs"
    logs.mkdir()
    procs = []
    try:
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
             "--port", str(port), "--no-dashboard", "--no-show"],
            stdout=subprocess.DEVNULL, stderr=open(logs / "scheduler.log", "w"), env=env))
        for i in range(2):
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", addr, "--nthreads", "1",
                 "--nworkers", "1", "--no-dashboard", "--name", f"w{i}",
                 "--local-directory", str(tmp_path / f"w{i}")],
                stdout=subprocess.DEVNULL, stderr=open(logs / f"worker{i}.log", "w"), env=env))
        # Wait (bounded) for both workers to register.
        deadline = time.time() + 45
        while True:
            try:
                with Client(addr, timeout=5) as c:
                    c.wait_for_workers(2, timeout=max(1, deadline - time.time()))
                    break
            except (OSError, TimeoutError):
                if time.time() > deadline or any(p.poll() is not None for p in procs):
                    pytest.fail("the Dask cluster did not start:\n" + "\n".join(
                        (logs / n).read_text()[-2000:] for n in sorted(os.listdir(logs))))
                time.sleep(0.5)
        remote = tmp_path / "remote"
        r = subprocess.run([sys.executable, str(SCRIPT), str(f), "--vspyre", vspyre, "--out",
                            str(remote), "--scheduler", addr], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        hosts = {json.loads(p.read_text())["host"] for p in (remote / "points").glob("*/result.json")}
        assert hosts
        assert comparable(read_csv(remote / "results.csv")) == \
            comparable(read_csv(local / "results.csv"))
    finally:
        _stop(procs)


def test_points_run_without_a_trace_and_rows_carry_no_unit_text(tmp_path, vspyre):
    # Each point passed --out, so vspyre recorded and wrote a Chrome trace (100+ MB on a large
    # kernel, most of a point's host time) that the sweep then deleted; and every counter's unit and
    # description became a text column of results.csv (about 3000 columns).
    f = write_sweep(tmp_path, """
base: @BASE@
axes:
  card.core.count: [32]
plans:
  - @BUNDLES@/mm_2048x512x2048_c32
outputs: [csv]
""")
    sw = vs.load_sweep(f, vspyre)
    tasks = vs.make_tasks(sw, vspyre)
    res = vs.run_point(tasks[0])
    assert res["status"] == "ok", res["error"]
    assert "--no-trace" in res["command"]
    kept = vs.run_point(vs.make_tasks(sw, vspyre, keep_traces=True)[0])
    assert "--no-trace" not in kept["command"] and kept.get("trace")
    row = vs.make_row(tasks[0], res)
    assert row["kernel_time_us"] > 0
    assert not [k for k in row if k.startswith("units.") or k.endswith(".desc")]
    assert len(row) < 1000


def test_axes_may_name_sim_quantum_and_the_core_count(vspyre):
    # describe lists them now (sim.quantum under example_path "sim", core.count under "card");
    # from a base config that sets neither, an axis on them was refused as unknown.
    keys = vs.known_keys(vspyre, ROOT / "configs" / "whatif" / "lx_4mib.yaml")
    assert "sim.quantum" in keys and "card.core.count" in keys
    assert "sim.sim.quantum" not in keys


# ------------------------------------------------------------------------------- launch seeds

def test_seeds_parse():
    assert vs.parse_seeds(None, "w") is None
    assert vs.parse_seeds(3, "w") == [1, 2, 3]
    assert vs.parse_seeds([7, 0, 2**63 - 1], "w") == [7, 0, 2**63 - 1]
    for bad, says in ((0, "from 1 to 1000"), (1001, "from 1 to 1000"), ([], "empty"),
                      (True, "expected a count"), ("3", "expected a count"), ([1, -1], "-1 is not"),
                      ([1, 2.5], "2.5 is not"), ([1, 2**63], "is not"), ([4, 4], "more than once: [4]")):
        with pytest.raises(vs.SweepError, match=r"w: .*" + __import__("re").escape(says)):
            vs.parse_seeds(bad, "w")


def test_seeds_and_a_launch_seed_axis_conflict(tmp_path, vspyre):
    f = write_sweep(tmp_path, """
base: @BASE@
axes:
  card.launch_seed: [1, 2]
seeds: 2
plans: [probe:pt]
""")
    with pytest.raises(vs.SweepError, match="seeds sets card.launch_seed .* axes names it too"):
        vs.load_sweep(f, vspyre)
    g = write_sweep(tmp_path, "base: @BASE@\nset: {card.launch_seed: 4}\naxes: {card.core.pt.pass_overhead: [4]}\n"
                    "plans: [probe:pt]\n", "g.yaml")
    with pytest.raises(vs.SweepError, match=r"--seeds \(with .*g\.yaml\) sets card\.launch_seed .* set names it too"):
        vs.run_sweep(g, vspyre=vspyre, out=tmp_path / "o", quiet=True, seeds=[1, 2])


def test_seeds_give_the_mean_and_the_range(tmp_path, vspyre):
    # A memory-bound kernel on 32 cores moves with the cores' start order: the row is the mean
    # over the seeds, with the range and the spread; the per-seed rows are kept.
    f = write_sweep(tmp_path, """
base: @BASE@
axes:
  card.core.clock: [1GHz, 1.5GHz]
seeds: [1, 2, 3]
plans:
  - @BUNDLES@/neg_2048x1024_c32
outputs: [csv]
""")
    out = tmp_path / "out"
    r = vs.run_sweep(f, vspyre=vspyre, out=out, jobs=2, quiet=True)
    assert r["total"] == 6 and r["failed"] == 0
    rows = read_csv(out / "results.csv")
    per = read_csv(out / "results_by_seed.csv")
    assert len(rows) == 2 and len(per) == 6
    assert sorted({p["seed"] for p in per}) == ["1", "2", "3"]
    for row in rows:
        mine = [float(p["kernel_time_us"]) for p in per if p["point"] == row["point"]]
        assert row["status"] == "ok" and row["seeds"] == "3" and row["seeds_ok"] == "3"
        assert float(row["kernel_time_us"]) == pytest.approx(sum(mine) / 3, rel=1e-12)
        assert float(row["kernel_time_us_min"]) == min(mine)
        assert float(row["kernel_time_us_max"]) == max(mine)
        assert max(mine) > min(mine), "the seeds must move a 32-core memory-bound kernel"
        spread = (max(mine) - min(mine)) / (sum(mine) / 3) * 100
        assert float(row["kernel_time_us_spread_percent"]) == pytest.approx(spread, abs=1e-3)
        # A stat column is the mean too.
        key = "card.memory.row_misses"
        vals = [float(p[key]) for p in per if p["point"] == row["point"]]
        assert float(row[key]) == pytest.approx(sum(vals) / 3, rel=1e-12)
    # A rerun runs nothing and gives the same table; --seeds on the command line replaces the
    # file's (one more seed: only it runs).
    r2 = vs.run_sweep(f, vspyre=vspyre, out=out, jobs=2, quiet=True)
    assert r2["skipped"] == 6
    assert comparable(read_csv(out / "results.csv")) == comparable(rows)
    r3 = vs.run_sweep(f, vspyre=vspyre, out=out, jobs=2, quiet=True, seeds=[1, 2, 3, 4])
    assert r3["total"] == 8 and r3["skipped"] == 6
    assert {row["seeds"] for row in read_csv(out / "results.csv")} == {"4"}


def test_a_failing_seed_fails_the_row(tmp_path, vspyre):
    f = write_sweep(tmp_path, """
base: @BASE@
axes:
  card.core.count: [8]
seeds: 2
plans:
  - @BUNDLES@/mm_2048x512x2048_c32
outputs: [csv]
""")
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, str(SCRIPT), str(f), "--vspyre", vspyre, "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    assert "point 0 seed 2 mm_2048x512x2048_c32 failed" in r.stderr
    (row,) = read_csv(out / "results.csv")
    assert row["status"] == "failed" and row["seeds_ok"] == "0" and row["kernel_time_us"] == ""
    # The same error from both seeds is given once, with both seeds.
    assert row["error"].startswith("seeds 1, 2: ") and "exceeds" in row["error"] and "; seed" not in row["error"]
    bad = subprocess.run([sys.executable, str(SCRIPT), str(f), "--vspyre", vspyre, "--out", str(out),
                          "--seeds", "1,x"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--seeds: expected a count (N: seeds 1 .. N) or comma-separated" in bad.stderr


def test_seeds_on_the_command_line_count_as_in_the_file(tmp_path, vspyre):
    # --seeds 3 is seeds 1, 2, 3 (as `seeds: 3`); a list names the seeds; `7,` is seed 7 alone.
    f = write_sweep(tmp_path, "base: @BASE@\naxes: {card.core.pt.pass_overhead: [13]}\nplans: [probe:pt]\n")
    def listed(arg):
        r = subprocess.run([sys.executable, str(SCRIPT), str(f), "--vspyre", vspyre, "--list", "--seeds", arg],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return [l.split("card.launch_seed=")[1] for l in r.stdout.splitlines()]
    assert listed("3") == ["1", "2", "3"]
    assert listed("4,9") == ["4", "9"]
    assert listed("7,") == ["7"]


def test_seeds_with_a_plan_the_seed_does_not_move(tmp_path, vspyre):
    # The PCIe probe gives the same number on every seed: the mean is that number exactly (a
    # float sum of five equal values is not), the range is zero, and the plots with their error
    # bars are written (a mean a rounding outside [min, max] made a negative error bar, and
    # matplotlib refused the plot after every run had finished).
    f = write_sweep(tmp_path, """
base: @BASE@
axes:
  card.core.pt.pass_overhead: [13, 14]
seeds: 5
plans: [probe:pcie]
outputs: [csv, plots]
""")
    out = tmp_path / "out"
    r = vs.run_sweep(f, vspyre=vspyre, out=out, jobs=2, quiet=True)
    assert r["failed"] == 0
    per = read_csv(out / "results_by_seed.csv")
    for row in read_csv(out / "results.csv"):
        mine = {p["probe.h2d_GBps"] for p in per if p["point"] == row["point"]}
        assert len(mine) == 1
        assert row["probe.h2d_GBps"] == row["probe.h2d_GBps_min"] == row["probe.h2d_GBps_max"] == mine.pop()
        assert float(row["probe.h2d_GBps_spread_percent"]) == 0
        assert "kernel_time_us_min" not in row or row["kernel_time_us_min"] == ""
    if _has("matplotlib"):
        assert (out / "plots" / "probe_pcie__card.core.pt.pass_overhead.png").exists()


def test_a_seed_that_failed_or_was_killed_fails_the_row_without_a_mean(tmp_path, vspyre):
    f = write_sweep(tmp_path, """
base: @BASE@
axes:
  card.core.pt.pass_overhead: [13]
seeds: [1, 2, 3]
plans:
  - @BUNDLES@/neg_2048x1024_c32
outputs: [csv]
""")
    out = tmp_path / "out"
    vs.run_sweep(f, vspyre=vspyre, out=out, jobs=2, quiet=True)
    per = read_csv(out / "results_by_seed.csv")
    k2 = next(p["key"] for p in per if p["seed"] == "2")
    res = out / "points" / k2 / "result.json"
    meta = json.loads(res.read_text())
    meta["row"].update(status="failed", error="timed out after 900 s", kernel_time_us=None)
    res.write_text(json.dumps(meta))
    r = vs.run_sweep(f, vspyre=vspyre, out=out, jobs=2, quiet=True)
    assert r["failed"] == 1 and r["skipped"] == 3
    (row,) = read_csv(out / "results.csv")
    # Two of three seeds are not the row's number: no mean, no range; the seeds that ran keep
    # theirs in results_by_seed.csv.
    assert row["status"] == "failed" and row["error"] == "seed 2: timed out after 900 s"
    assert row["seeds_ok"] == "2" and row["kernel_time_us"] == "" and row.get("kernel_time_us_min", "") == ""
    assert len(row["key"].split()) == 3  # each seed's points/<key>/
    assert sum(1 for p in read_csv(out / "results_by_seed.csv") if p["kernel_time_us"]) == 2
    # A run that vspyre did not finish (killed by a signal) is named as such, not as a Ctrl-C.
    tasks = vs.make_tasks(vs.load_sweep(f, vspyre), vspyre)
    (killed,) = [t for t in tasks if t["seed"] == 3]
    rows = {t["key"]: vs.load_done(out, t) for t in tasks if t is not killed}
    agg = vs.aggregate_seeds(tasks, rows, {}, {"kernel_time_us"},
                             {killed["key"]: "not run: vspyre was stopped by signal 9 (the next sweep runs it again)"})
    assert "seed 3: not run: vspyre was stopped by signal 9" in agg["error"]
    # A sweep without seeds into the same --out leaves no stale per-seed table.
    h = write_sweep(tmp_path, "base: @BASE@\naxes: {card.core.pt.pass_overhead: [13]}\nplans: [probe:pt]\n"
                    "outputs: [csv]\n", "h.yaml")
    vs.run_sweep(h, vspyre=vspyre, out=out, jobs=2, quiet=True, replace=True)
    assert not (out / "results_by_seed.csv").exists()


def test_help_says_which_binary_runs_through_vspyre_sweep(tmp_path, stand_in):
    # --help said --vspyre defaults to $VSPYRE_BIN, but `vspyre sweep` passes --vspyre <itself>
    # first, so $VSPYRE_BIN is never read there; the help now says so.
    h = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60).stdout
    h = " ".join(h.split())
    assert "`vspyre sweep` passes the binary it was run as, so $VSPYRE_BIN is not read there" in h, h
    assert "default: $VSPYRE_BIN" not in h
    # What the help says is what happens: as the binary calls the script, $VSPYRE_BIN is not read,
    # and a --vspyre of the user's (after the binary's) wins.
    f = tmp_path / "s.yaml"
    f.write_text(sweep_text("[8]"))
    env = dict(os.environ, VSPYRE_BIN=str(tmp_path / "no_such_vspyre"))
    as_binary = [sys.executable, str(SCRIPT), "--vspyre", stand_in, str(f), "--list"]
    r = subprocess.run(as_binary, capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0 and "card.core.count=8" in r.stdout, r.stderr
    r = subprocess.run(as_binary + ["--vspyre", str(tmp_path / "mine")], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 2 and f"vspyre binary {tmp_path / 'mine'} does not exist" in r.stderr, r.stderr
