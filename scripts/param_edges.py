#!/usr/bin/env python3
"""Every card parameter at its edges: no value may hang, crash or quietly give nonsense.

    python3 scripts/param_edges.py --vspyre build/release/cli/vspyre [--config FILE ...]
        [--fixture DIR ...] [--probes] [--only SUBSTR] [--jobs N] [--timeout S] [--out FILE.jsonl]

Reads the parameters from `vspyre describe --json` and runs each at edge values of its kind
(zero, one, negative, tiny, huge; every choice; both booleans) with `-p KEY=VALUE`, one process
per (config, parameter, value, plan). A run passes when it either succeeds with a finite,
positive kernel time (or a probe's JSON without NaN or infinity) or fails as bad input: exit 1
with one `vspyre: error:` line that names the parameter, or the capacity, address or plan the
value made impossible. Anything else fails the script (exit 1), listed at the end: a run past
the timeout (a hang), a signal (a crash, or the kernel killing a run that filled memory), exit 2
(an internal error), an error that does not name what was wrong.

The sweep that found the hangs and crashes fixed at stop 43 (bench/validation/README.md has no
part in it: this is robustness, not accuracy). CI runs it on one fixture in both DMA models.
Standard library only.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Edge values by parameter kind (units as `vspyre describe` lists them).
EDGES = {
    "integer": ["0", "1", "2", "7", "1000000", "-1"],
    "number": ["0", "0.001", "-1", "1e9", "nan"],
    "time": ["0ns", "1ps", "1ms", "-1ns"],
    "size": ["0B", "1B", "100B", "128B", "1GiB"],
    "frequency": ["0Hz", "1Hz", "1MHz", "1THz"],
    "bandwidth": ["0GB/s", "1B/s", "10TB/s"],
}
# What an error may name instead of the parameter itself: a value can make a plan impossible.
ALSO_NAMED = ("capacity", "plan stage", "LX", "lx", "does not fit", "cores")
PROBE_OF = {"card.host_link": "pcie", "card.ring": "ring", "card.memory": "memory", "card.core": "pt"}


def parameters(vspyre: str, config: str) -> list[tuple[str, str, list[str]]]:
    """(key, kind, choices) of every parameter the card reads, one entry per key (core_0 for all)."""
    out = subprocess.run([vspyre, "describe", "--json", "--config", config], capture_output=True, text=True, check=True)
    seen, params = set(), []
    for comp in json.loads(out.stdout):
        path = comp["example_path"]
        if path.startswith("card.core_"):
            path = "card.core"
        for p in comp["parameters"]:
            key = f"{path}.{p['name']}"
            if p["name"] == "trace" or key in seen:
                continue
            seen.add(key)
            params.append((key, p["kind"], p.get("choices", [])))
    return params


def values(kind: str, choices: list[str]) -> list[str]:
    if kind == "boolean":
        return ["true", "false"]
    if kind == "choice":
        return list(choices)
    return EDGES.get(kind, [])


def run_one(vspyre: str, config: str, key: str, value: str, plan: str, timeout: float) -> dict:
    if plan.startswith("probe:"):
        cmd = [vspyre, "probe", plan[6:], "--json", "--config", config, "-p", f"{key}={value}"]
    else:
        cmd = [vspyre, "run", "--no-data", "--json", "--config", config, "-p", f"{key}={value}", plan]
    row = {"config": os.path.relpath(config, ROOT), "key": key, "value": value, "plan": os.path.relpath(plan, ROOT)
           if not plan.startswith("probe:") else plan}
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {**row, "outcome": "hang", "detail": f"no answer in {timeout:g} s"}
    if r.returncode == 0:
        if plan.startswith("probe:"):
            text = r.stdout.lower()
            bad = "nan" in text or "infinity" in text or "inf," in text
            return {**row, "outcome": "nonsense" if bad else "ok", "detail": r.stdout[:160]}
        try:
            t = json.loads(r.stdout)["kernel_time_us"]
        except (ValueError, KeyError) as e:
            return {**row, "outcome": "nonsense", "detail": f"no kernel_time_us in the JSON: {e}"}
        good = isinstance(t, (int, float)) and math.isfinite(t) and t > 0
        return {**row, "outcome": "ok" if good else "nonsense", "detail": f"kernel_time_us {t}"}
    err = r.stderr.strip().splitlines()
    last = err[-1] if err else ""
    if r.returncode == 1 and last.startswith("vspyre: error: "):
        named = key.split(".")[-1] in last or any(w in last for w in ALSO_NAMED)
        return {**row, "outcome": "error" if named else "unnamed error", "detail": last}
    if r.returncode < 0:
        return {**row, "outcome": "crash", "detail": f"signal {-r.returncode}: {r.stderr[-200:]}"}
    return {**row, "outcome": f"exit {r.returncode}", "detail": r.stderr[-240:]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vspyre", default=os.path.join(ROOT, "build", "release", "cli", "vspyre"))
    ap.add_argument("--config", action="append", help="card config(s); default: configs/spyre.yaml and spyre_flow.yaml")
    ap.add_argument("--fixture", action="append", help="bundle dir(s) to run; default: three small fixtures")
    ap.add_argument("--probes", action="store_true", help="also run the probe that exercises each component")
    ap.add_argument("--only", help="only parameters whose key contains this")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds a run may take before it counts as a hang")
    ap.add_argument("--out", help="write every run as one JSON line here")
    a = ap.parse_args(argv)
    configs = [os.path.abspath(c) for c in (a.config or [os.path.join(ROOT, "configs", "spyre.yaml"),
                                                         os.path.join(ROOT, "configs", "spyre_flow.yaml")])]
    fixtures = [os.path.abspath(f) for f in (a.fixture or [
        os.path.join(ROOT, "tests", "fixtures", "bundles", n)
        for n in ("neg_2048x1024_c32", "mm_2048x512x2048_c4", "relu_neg_shuffle")])]
    for f in fixtures:
        if not os.path.isdir(f):
            print(f"param_edges: error: {f}: not a bundle directory", file=sys.stderr)
            return 1
    if not os.access(a.vspyre, os.X_OK):
        print(f"param_edges: error: {a.vspyre}: not an executable (build first, or pass --vspyre)", file=sys.stderr)
        return 1
    jobs = []
    for config in configs:
        for key, kind, choices in parameters(a.vspyre, config):
            if a.only and a.only not in key:
                continue
            plans = list(fixtures)
            if a.probes:
                comp = key.rsplit(".", 1)[0]
                if comp in PROBE_OF:
                    plans.append("probe:" + PROBE_OF[comp])
            for v in values(kind, choices):
                for plan in plans:
                    jobs.append((config, key, v, plan))
    counts: dict[str, int] = {}
    failures = []
    out = open(a.out, "w") if a.out else None
    with cf.ThreadPoolExecutor(max(1, a.jobs)) as ex:
        for res in ex.map(lambda j: run_one(a.vspyre, j[0], j[1], j[2], j[3], a.timeout), jobs):
            counts[res["outcome"]] = counts.get(res["outcome"], 0) + 1
            if res["outcome"] not in ("ok", "error"):
                failures.append(res)
            if out:
                out.write(json.dumps(res) + "\n")
    if out:
        out.close()
    print(f"param_edges: {len(jobs)} runs: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    for f in failures:
        print(f"  {f['outcome']}: -p {f['key']}={f['value']} ({f['config']}, {f['plan']}): {f['detail']}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
