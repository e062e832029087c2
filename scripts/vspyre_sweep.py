#!/usr/bin/env python3
"""vspyre sweep: run a what-if sweep of card configurations over kernel bundles and probes.

    vspyre sweep SWEEP.yaml [--jobs N] [--out DIR] [--replace] [--seeds N|SEED,SEED...] [--scheduler tcp://HOST:PORT]
    python3 scripts/vspyre_sweep.py SWEEP.yaml [...] [--vspyre PATH/TO/vspyre]

`vspyre sweep` runs this script with --vspyre set to the binary it was run as ($VSPYRE_BIN is read
only when the script is run on its own without --vspyre).

A sweep file names a base card config, axes over config keys (lists, ranges, log ranges;
crossed or zipped), the plans to run (bundle directories, globs, or probe:memory|ring|pcie|pt)
and the outputs wanted. Every (point, plan) pair runs `vspyre run|probe ... --json --out DIR` as
a subprocess, locally on all cores or on a Dask distributed cluster. Each finished pair is saved
at once under OUT/points/<key>/ (key = sha256 of the resolved config inputs and the plan), so a
rerun skips what is done and an interrupted sweep loses nothing that finished. At the end
OUT/results.csv (and results.parquet when pyarrow is installed) hold one row per point and plan,
every stat a column, and OUT/plots/ a PNG per plan and axis (a heatmap when there are two axes).
With `seeds:` each pair runs once per card.launch_seed: results.csv then holds the mean over the
seeds with the headline's min, max and spread (the plots draw the range as error bars), and
results_by_seed.csv one row per seed. OUT/sweep.yaml (a copy of the sweep file) says which sweep OUT
holds: the same sweep file (as it was, or edited since) resumes there, another sweep into the same
OUT is refused unless --replace (which reuses the runs the two share), and a sweep.yaml vspyre did
not write is never overwritten.

The simulation stays in C++; this script only orchestrates. Standard library + PyYAML;
dask.distributed for --scheduler, matplotlib for plots, pyarrow for Parquet (all optional at
import time; each is needed only when its feature is used).
"""
from __future__ import annotations

import argparse
import csv
import difflib
import glob
import hashlib
import itertools
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from vspyre_yaml import UniqueKeyLoader

PROBES = ("memory", "ring", "pcie", "pt")
SWEEP_KEYS = {"name", "description", "base", "set", "axes", "combine", "zip", "plans", "outputs",
              "timeout", "jobs", "seeds"}
SEED_KEY = "card.launch_seed"
# The most values an axis may have, points a sweep may have (the axes crossed) and runs it may
# make (points x plans x seeds): each is checked before the values, points or runs are built, so
# that a typo in a range or a num stops at once instead of filling the memory.
MAX_AXIS_VALUES = 100000
MAX_POINTS = 100000
MAX_RUNS = 1000000
SEED_MAX = 2**63 - 1
OUTPUT_KINDS = {"csv", "parquet", "plots"}
# Headline number per plan kind: the y axis of the plots and the `kernel_time_us` column.
HEADLINE = {"run": "run.kernel_time_us", "probe:pt": "probe.time_us",
            "probe:memory": "probe.copy_GBps", "probe:ring": "probe.all_to_all_GBps",
            "probe:pcie": "probe.h2d_GBps"}
FIXED_COLUMNS = ["point", "plan", "status", "error", "kernel_time_us", "elapsed_s", "key"]
# With seeds: results.csv's columns after the fixed ones (the headline's range over the seeds),
# and results_by_seed.csv's.
SEED_COLUMNS = ["kernel_time_us_min", "kernel_time_us_max", "kernel_time_us_spread_percent",
                "seeds", "seeds_ok"]


class SweepError(Exception):
    """A problem with the sweep file: reported before anything runs."""


# ----------------------------------------------------------------------------------------------
# Axes


def _fmt(v):
    """A number as -p wants it: integral floats without '.0', others in shortest form."""
    if isinstance(v, bool):
        return v
    if isinstance(v, float):
        if v.is_integer():
            return int(v)
        return float(f"{v:.12g}")
    return v


def _with_unit(values, unit):
    if not unit:
        return values
    return [f"{v}{unit}" for v in values]


def _range_args(spec, name, what, keys):
    """[a, b] / [a, b, c] / {start:, stop:, step:|num:|base:} -> dict."""
    if isinstance(spec, (list, tuple)):
        if not 2 <= len(spec) <= 3:
            raise SweepError(f"axis '{name}': {what} takes [start, stop] or [start, stop, {keys[2]}]")
        out = {"start": spec[0], "stop": spec[1]}
        if len(spec) == 3:
            out[keys[2]] = spec[2]
        return out
    if isinstance(spec, dict):
        bad = set(spec) - set(keys) - {"unit"}
        if bad:
            raise SweepError(f"axis '{name}': unknown {what} field(s) {sorted(bad)} "
                             f"(expected {', '.join(keys)})")
        return dict(spec)
    raise SweepError(f"axis '{name}': {what} must be a list or a mapping")


def _number(v, name, field):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise SweepError(f"axis '{name}': {field} must be a finite number, found {v!r}")
    return v


def axis_values(name, spec):
    """The values of one axis: a list, {values: [...]}, {range: ...} or {logrange: ...}.

    range: start, stop (inclusive), step (default 1).
    logrange: start, stop (inclusive); either base (default 2: start, start*base, ... <= stop)
    or num (num points spaced geometrically, rounded to integers when start and stop are).
    Any of them may carry unit: MiB (appended to every value, e.g. 1MiB).
    """
    unit = None
    if isinstance(spec, dict):
        unit = spec.get("unit")
        kinds = [k for k in ("values", "range", "logrange") if k in spec]
        if len(kinds) != 1:
            raise SweepError(f"axis '{name}': give a list, or exactly one of values:, range:, "
                             f"logrange: (found {sorted(spec)})")
        kind = kinds[0]
        extra = set(spec) - {kind, "unit"}
        allowed = {"values": set(), "range": {"start", "stop", "step"},
                   "logrange": {"start", "stop", "base", "num"}}[kind]
        if extra - allowed:
            raise SweepError(f"axis '{name}': unexpected field(s) {sorted(extra - allowed)} "
                             f"next to {kind}:")
        siblings = {k: spec[k] for k in extra}
        if kind == "values":
            spec = spec["values"]
        elif kind == "range":
            args = _range_args(spec["range"], name, "range", ("start", "stop", "step"))
            args.update(siblings)
            start = _number(args.get("start"), name, "start")
            stop = _number(args.get("stop"), name, "stop")
            step = _number(args.get("step", 1), name, "step")
            unit = args.get("unit", unit)
            if step == 0:
                raise SweepError(f"axis '{name}': range step must not be 0")
            vals, i = [], 0
            eps = abs(step) * 1e-9
            while True:
                v = start + i * step
                if (step > 0 and v > stop + eps) or (step < 0 and v < stop - eps):
                    break
                vals.append(_fmt(v))
                i += 1
                if i > MAX_AXIS_VALUES:
                    raise SweepError(f"axis '{name}': range has more than {MAX_AXIS_VALUES} values")
            spec = _with_unit(vals, unit)
            unit = None
        else:
            args = _range_args(spec["logrange"], name, "logrange", ("start", "stop", "base", "num"))
            args.update(siblings)
            start = _number(args.get("start"), name, "start")
            stop = _number(args.get("stop"), name, "stop")
            unit = args.get("unit", unit)
            if start <= 0 or stop <= 0:
                raise SweepError(f"axis '{name}': logrange start and stop must be positive")
            vals = []
            if "num" in args:
                num = _number(args["num"], name, "num")
                if int(num) != num or num < 0:
                    raise SweepError(f"axis '{name}': logrange num must be a whole number")
                num = int(num)
                if num > MAX_AXIS_VALUES:
                    raise SweepError(f"axis '{name}': logrange num is {num}, more than the limit of "
                                     f"{MAX_AXIS_VALUES} values an axis may have")
                ints = isinstance(start, int) and isinstance(stop, int)
                for i in range(num):
                    f = 0.0 if num == 1 else i / (num - 1)
                    v = math.exp(math.log(start) + f * (math.log(stop) - math.log(start)))
                    v = round(v) if ints else v
                    if not vals or vals[-1] != _fmt(v):
                        vals.append(_fmt(v))
            else:
                base = _number(args.get("base", 2), name, "base")
                if base <= 1:
                    raise SweepError(f"axis '{name}': logrange base must be greater than 1")
                v = start
                while v <= stop * (1 + 1e-9):
                    vals.append(_fmt(v))
                    v *= base
                    if len(vals) > MAX_AXIS_VALUES:
                        raise SweepError(f"axis '{name}': logrange has more than {MAX_AXIS_VALUES} values")
            spec = _with_unit(vals, unit)
            unit = None
    if not isinstance(spec, list):
        raise SweepError(f"axis '{name}': expected a list of values, {{values: [...]}}, "
                         f"{{range: [start, stop, step]}} or {{logrange: [start, stop]}}, "
                         f"found {spec!r}")
    if len(spec) > MAX_AXIS_VALUES:
        raise SweepError(f"axis '{name}' has {len(spec)} values, more than the limit of {MAX_AXIS_VALUES}")
    for v in spec:
        if isinstance(v, (dict, list)) or v is None:
            raise SweepError(f"axis '{name}': values must be scalars, found {v!r}")
    spec = _with_unit([_fmt(v) for v in spec], unit)
    if not spec:
        raise SweepError(f"axis '{name}' is empty: it must have at least one value")
    return spec


def expand_points(axes, combine="cross", zip_groups=None):
    """The points of a sweep: a list of {key: value} in order.

    combine: cross (every combination) or zip (all axes side by side, equal lengths).
    zip_groups: lists of axis names zipped together; the groups and the remaining axes are
    then crossed.
    """
    names = list(axes)
    if not names:
        return [{}]
    if combine not in ("cross", "zip"):
        raise SweepError(f"combine must be 'cross' or 'zip', found {combine!r}")
    if combine == "zip":
        if zip_groups:
            raise SweepError("combine: zip zips every axis; do not also give zip: groups")
        groups = [names]
    else:
        groups, used = [], set()
        for g in zip_groups or []:
            if not isinstance(g, list) or len(g) < 2:
                raise SweepError(f"zip: each group is a list of two or more axis names, found {g!r}")
            for n in g:
                if n not in axes:
                    raise SweepError(f"zip: '{n}' is not an axis (axes: {', '.join(names)})")
                if n in used:
                    raise SweepError(f"zip: axis '{n}' is in more than one group")
                used.add(n)
            groups.append(list(g))
        # Keep the file's order: each group sits where its first axis is.
        order = []
        for n in names:
            g = next((g for g in groups if n in g), None)
            if g is None:
                order.append([n])
            elif n == next(x for x in names if x in g):
                order.append(g)
        groups = order
    parts = []
    for g in groups:
        lens = {n: len(axes[n]) for n in g}
        if len(set(lens.values())) > 1:
            raise SweepError("zipped axes must have the same length: "
                             + ", ".join(f"{n} has {l}" for n, l in lens.items()))
        parts.append([{n: axes[n][i] for n in g} for i in range(lens[g[0]])])
    total = math.prod(len(p) for p in parts)
    if total > MAX_POINTS:
        raise SweepError(f"the sweep would have {total} points ("
                         + " x ".join(str(len(p)) for p in parts)
                         + f"), more than the limit of {MAX_POINTS}")
    points = []
    for combo in itertools.product(*parts):
        p = {}
        for d in combo:
            p.update(d)
        points.append({n: p[n] for n in names})
    return points


# ----------------------------------------------------------------------------------------------
# Config keys and hashing


def _read_text(path, what):
    """A file's text, or a SweepError naming it (missing, a directory, not UTF-8)."""
    path = Path(path)
    if path.is_dir():
        raise SweepError(f"{what} {path} is a directory, expected a YAML file")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise SweepError(f"{what} {path}: {e.strerror or e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SweepError(f"{what} {path}: not a UTF-8 text file (byte {e.start} is 0x{data[e.start]:02x})") from None


def _parse_yaml(text, path, what):
    """YAML text -> data, or a one-line SweepError at file:line:column (a syntax error, a key given
    twice)."""
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)
    except yaml.MarkedYAMLError as e:
        m = e.problem_mark or e.context_mark
        where = f"{path}:{m.line + 1}:{m.column + 1}" if m else str(path)
        msg = " ".join(str(e.problem or e.context or "invalid YAML").split())
        raise SweepError(f"{what} {where}: {msg}") from None
    except yaml.YAMLError as e:
        raise SweepError(f"{what} {path}: {' '.join(str(e).split())}") from None


def _load_yaml(path, what="config"):
    return _parse_yaml(_read_text(path, what), path, what) or {}


def config_files(path, seen=None, what="config"):
    """The config file and every file it includes (depth first), as (path, text). A file that
    cannot be read or parsed is a SweepError naming it."""
    path = Path(path).resolve()
    seen = seen if seen is not None else set()
    if path in seen:
        return []
    seen.add(path)
    text = _read_text(path, what)
    out = []
    data = _parse_yaml(text, path, what) or {}
    inc = data.get("include", []) if isinstance(data, dict) else []
    for i in [inc] if isinstance(inc, str) else inc if isinstance(inc, list) else []:
        p = (path.parent / str(i))
        if p.exists():
            out += config_files(p, seen)
    return out + [(path, text)]


def _flatten_config(node, prefix, out):
    if isinstance(node, dict):
        if "value" in node and prefix:
            out.add(prefix)
            return
        for k, v in node.items():
            if k == "include" and not prefix:
                continue
            _flatten_config(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif prefix:
        out.add(prefix)


def known_keys(vspyre, config):
    """Every config key an axis may set: the parameters `vspyre describe` lists (card.core_0.x
    becomes card.core.x) and every key present in the base config and its includes."""
    keys = set()
    for p, _ in config_files(config):
        _flatten_config(_load_yaml(p), "", keys)
    try:
        r = subprocess.run([vspyre, "describe", "--config", str(config), "--json"],
                           capture_output=True, text=True, timeout=60)
    except OSError as e:
        raise SweepError(f"cannot run {vspyre}: {e}") from e
    if r.returncode != 0:
        raise SweepError(f"vspyre describe failed on {config}: {r.stderr.strip()}")
    for comp in json.loads(r.stdout):
        prefix = ".".join(re.sub(r"_\d+$", "", s) for s in comp.get("example_path", "").split("."))
        for p in comp.get("parameters", []):
            keys.add(f"{prefix}.{p['name']}" if prefix else p["name"])
    return keys


def check_keys(names, keys, what="axis"):
    for n in names:
        if n not in keys:
            close = difflib.get_close_matches(n, sorted(keys), n=3, cutoff=0.6)
            hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise SweepError(f"unknown {what} key '{n}'{hint} "
                             f"(`vspyre describe` lists every parameter)")


BUNDLE_REF = "bundle.mlir.ref"  # names, relative to its directory, a bundle.mlir kept elsewhere


def ref_target(ref):
    """The file a bundle.mlir.ref names (its one line that is neither blank nor a # comment),
    or None when it names none that exists: `vspyre run` then says what is wrong with it."""
    lines = [l.strip() for l in ref.read_text().splitlines()]
    paths = [l for l in lines if l and not l.startswith("#")]
    if len(paths) != 1:
        return None
    t = ref.parent / paths[0]
    return t if t.is_file() else None


def plan_identity(plan):
    """What identifies a plan in the hash: probe name, or the bundle's name and file contents
    (with those of the bundle.mlir a bundle.mlir.ref names)."""
    if plan["kind"] == "probe":
        return plan["name"]
    h = hashlib.sha256()
    root = Path(plan["path"])
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
        t = ref_target(f) if f.name == BUNDLE_REF else None
        if t is not None:
            h.update(b"ref\0" + t.read_bytes() + b"\0")
    return f"bundle:{root.name}:{h.hexdigest()}"


def point_key(config_texts, overrides, plan_id):
    h = hashlib.sha256()
    for name, text in config_texts:
        h.update(b"config\0" + name.encode() + b"\0" + text.encode() + b"\0")
    for k, v in sorted(overrides.items()):
        h.update(f"-p\0{k}={v}\0".encode())
    h.update(b"plan\0" + plan_id.encode())
    return h.hexdigest()


# ----------------------------------------------------------------------------------------------
# The sweep file


def load_sweep(path, vspyre):
    """Parse and check a sweep file. Raises SweepError before anything runs."""
    path = Path(path)
    if not path.exists():
        raise SweepError(f"sweep file {path} does not exist")
    spec = _load_yaml(path, "sweep file")
    if not isinstance(spec, dict):
        raise SweepError(f"{path}: expected a mapping at the top level")
    bad = set(spec) - SWEEP_KEYS
    if bad:
        raise SweepError(f"{path}: unknown field(s) {sorted(bad)} (expected {sorted(SWEEP_KEYS)})")
    timeout = spec.get("timeout", 900)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 1e6:
        raise SweepError(f"{path}: timeout: expected a number of seconds per run, more than 0 and at most "
                         f"1e6, found {timeout!r}")
    jobs = spec.get("jobs")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise SweepError(f"{path}: jobs: expected a whole number of runs at once, 1 or more, found {jobs!r}")
    here = path.resolve().parent
    base = spec.get("base")
    if base is None:
        base = Path(os.environ.get("VSPYRE_CONFIG") or default_config_dir() / "spyre.yaml")
    else:
        base = here / str(base)
    if Path(base).is_dir():
        raise SweepError(f"{path}: base config {base} is a directory, expected a config file")
    if not Path(base).is_file():
        raise SweepError(f"{path}: base config {base} does not exist")
    base = Path(base).resolve()
    try:  # read and parsed here, so that a bad one is named as the sweep's base
        config_files(base, what="base config")
    except SweepError as e:
        raise SweepError(f"{path}: {e}") from None

    axes_spec = spec.get("axes") or {}
    if not isinstance(axes_spec, dict):
        raise SweepError(f"{path}: axes must be a mapping of config key -> values")
    try:
        axes = {str(k): axis_values(str(k), v) for k, v in axes_spec.items()}
    except SweepError as e:
        raise SweepError(f"{path}: {e}") from None
    try:  # before `vspyre describe` runs: a sweep of too many points stops at once
        points = expand_points(axes, spec.get("combine", "cross"), spec.get("zip"))
    except SweepError as e:
        raise SweepError(f"{path}: {e}") from None
    fixed = spec.get("set") or {}
    if not isinstance(fixed, dict):
        raise SweepError(f"{path}: set must be a mapping of config key -> value")
    fixed = {str(k): _fmt(v) for k, v in fixed.items()}
    keys = known_keys(vspyre, base)
    check_keys(axes, keys, "axis")
    check_keys(fixed, keys, "set")
    seeds = parse_seeds(spec.get("seeds"), f"{path}: seeds")
    check_seed_conflict(seeds, axes, fixed, f"{path}: seeds")

    plans_spec = spec.get("plans")
    if isinstance(plans_spec, str):
        plans_spec = [plans_spec]
    if not plans_spec:
        raise SweepError(f"{path}: plans is empty: name bundle directories, globs or probe:NAME")
    plans = []
    for p in plans_spec:
        p = str(p)
        if p.startswith("probe:"):
            name = p.split(":", 1)[1]
            if name not in PROBES:
                raise SweepError(f"{path}: unknown probe '{name}' (one of {', '.join(PROBES)})")
            plans.append({"kind": "probe", "name": p, "probe": name})
            continue
        pattern = p if os.path.isabs(p) else str(here / p)
        matches = sorted(glob.glob(pattern)) if glob.has_magic(p) else [pattern]
        matches = [m for m in matches if any(Path(m, n).is_file() for n in ("bundle.mlir", BUNDLE_REF))]
        if not matches:
            raise SweepError(f"{path}: plan '{p}' matches no bundle directory (a directory "
                             f"holding bundle.mlir or {BUNDLE_REF}), relative to {here}")
        for m in matches:
            plans.append({"kind": "bundle", "name": Path(m).name, "path": str(Path(m).resolve())})
    names = [pl["name"] for pl in plans]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise SweepError(f"{path}: plan(s) named more than once: {sorted(dup)}")

    outputs = spec.get("outputs", ["csv", "parquet", "plots"])
    if isinstance(outputs, str):  # `outputs: csv`: one kind, not its letters
        outputs = [outputs]
    metric = None
    if isinstance(outputs, dict):
        metric = outputs.get("metric")
        outputs = [k for k in sorted(OUTPUT_KINDS) if outputs.get(k, True)]
    outputs = set(outputs or [])
    if outputs - OUTPUT_KINDS:
        raise SweepError(f"{path}: unknown output(s) {sorted(outputs - OUTPUT_KINDS)} "
                         f"(expected {sorted(OUTPUT_KINDS)})")
    outputs.add("csv")
    return {"path": path, "name": spec.get("name") or path.stem, "base": base, "axes": axes,
            "set": fixed, "points": points, "plans": plans, "outputs": outputs,
            "metric": metric, "timeout": float(timeout), "jobs": jobs, "seeds": seeds}


def check_seed_conflict(seeds, axes, fixed, where):
    """Seeds set card.launch_seed for every point: an axis or a `set:` of it would be overwritten."""
    if seeds and (SEED_KEY in axes or SEED_KEY in fixed):
        raise SweepError(f"{where} sets {SEED_KEY} for every point, and the sweep file's "
                         f"{'axes' if SEED_KEY in axes else 'set'} names it too: keep one")


def parse_seeds_arg(text):
    """--seeds: N (a count: seeds 1 .. N, as `seeds: N` in a sweep file) or a comma-separated list
    of card.launch_seed values (`7,` is the one seed 7)."""
    parts = [p.strip() for p in text.split(",")]
    try:
        if len(parts) == 1:
            return int(parts[0])
        return [int(p) for p in parts if p != ""]
    except ValueError:
        raise SweepError(f"--seeds: expected a count (N: seeds 1 .. N) or comma-separated card.launch_seed "
                         f"values (7, for the one seed 7), got '{text}'") from None


def parse_seeds(spec, where):
    """`seeds: N` (the seeds 1 .. N) or `seeds: [a, b, ...]` -> a list of card.launch_seed values,
    or None when absent."""
    if spec is None:
        return None
    if isinstance(spec, bool) or not isinstance(spec, (int, list)):
        raise SweepError(f"{where}: expected a count (seeds 1 .. N) or a list of card.launch_seed "
                         f"values, got {spec!r}")
    if isinstance(spec, int):
        if not 1 <= spec <= 1000:
            raise SweepError(f"{where}: a count of seeds must be from 1 to 1000, got {spec}")
        return list(range(1, spec + 1))
    if not spec:
        raise SweepError(f"{where}: the list is empty")
    for v in spec:
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= SEED_MAX:
            raise SweepError(f"{where}: {v!r} is not a card.launch_seed (an integer from 0 to 2^63-1)")
    dup = sorted({v for v in spec if spec.count(v) > 1})
    if dup:
        raise SweepError(f"{where}: seed(s) listed more than once: {dup}")
    return list(spec)


def default_config_dir():
    return Path(__file__).resolve().parent.parent / "configs"


def find_vspyre():
    if os.environ.get("VSPYRE_BIN"):
        return os.environ["VSPYRE_BIN"]
    w = shutil.which("vspyre")
    if w:
        return w
    root = Path(__file__).resolve().parent.parent
    found = sorted(root.glob("build/*/cli/vspyre"), key=lambda p: p.stat().st_mtime)
    if found:
        return str(found[-1])
    raise SweepError("cannot find the vspyre binary: pass --vspyre or set VSPYRE_BIN")


def make_tasks(sw, vspyre, keep_traces=False):
    nseeds = len(sw.get("seeds") or [None])
    runs = len(sw["points"]) * len(sw["plans"]) * nseeds
    if runs > MAX_RUNS:
        raise SweepError(f"{sw['path']}: the sweep would make {runs} runs ({len(sw['points'])} points x "
                         f"{len(sw['plans'])} plans x {nseeds} seeds), more than the limit of {MAX_RUNS}")
    texts = [(p.name, t) for p, t in config_files(sw["base"])]
    plan_ids = {pl["name"]: plan_identity(pl) for pl in sw["plans"]}
    tasks = []
    for i, point in enumerate(sw["points"]):
        base_overrides = dict(sw["set"])
        base_overrides.update(point)
        for pl in sw["plans"]:
            # Without seeds a pair runs once on the config's own seed (and keeps the key it had
            # before seeds existed, so an earlier sweep's results still count).
            for seed in sw.get("seeds") or [None]:
                overrides = dict(base_overrides)
                if seed is not None:
                    overrides[SEED_KEY] = seed
                key = point_key(texts, overrides, plan_ids[pl["name"]])
                tasks.append({"index": i, "axes": point, "plan": pl, "overrides": overrides,
                              "config": str(sw["base"]), "vspyre": vspyre, "key": key, "seed": seed,
                              "timeout": sw["timeout"], "keep_traces": keep_traces})
    return tasks


# ----------------------------------------------------------------------------------------------
# Running one point (locally or on a Dask worker)


def run_point(task):
    """Run one (point, plan) pair in a scratch directory; return everything the row needs.

    Runs on a Dask worker too: it needs the vspyre binary, the base config and the bundle at the
    same paths there (a shared filesystem or the same image); $VSPYRE_WORKER_BIN on the worker
    overrides the binary's path. Nothing is written outside the scratch directory.
    """
    import os as _os
    import socket as _socket
    import subprocess as _sp
    import tempfile as _tf
    import time as _time
    vspyre = _os.environ.get("VSPYRE_WORKER_BIN") or task["vspyre"]
    pl = task["plan"]
    t0 = _time.time()
    res = {"key": task["key"], "status": "failed", "error": "", "stats": None,
           "resolved": None, "stdout": "", "stderr": "", "host": _socket.gethostname()}
    with _tf.TemporaryDirectory(prefix="vspyre-sweep-") as tmp:
        out = _os.path.join(tmp, "out")
        if pl["kind"] == "probe":
            cmd = [vspyre, "probe", pl["probe"]]
        else:
            cmd = [vspyre, "run", pl["path"], "--no-data"]
        cmd += ["--config", task["config"], "--json", "--out", out]
        if not task.get("keep_traces"):
            cmd.append("--no-trace")  # recording a trace was most of a point's host time
        for k, v in task["overrides"].items():
            v = str(v).lower() if isinstance(v, bool) else v
            cmd += ["-p", f"{k}={v}"]
        res["command"] = cmd
        try:
            r = _sp.run(cmd, capture_output=True, text=True, timeout=task["timeout"])
            res["stdout"], res["stderr"] = r.stdout, r.stderr
            if r.returncode in (-2, -15, -9, -1):  # SIGINT, SIGTERM, SIGKILL, SIGHUP
                res["status"] = "interrupted"
                res["error"] = f"vspyre was stopped by signal {-r.returncode}"
            elif r.returncode < 0:
                res["error"] = (f"vspyre crashed (signal {-r.returncode}): "
                                + r.stderr.strip()[-300:])
            elif r.returncode != 0:
                lines = [l for l in r.stderr.strip().splitlines() if l.strip()]
                err = next((l for l in reversed(lines) if "error" in l.lower()),
                           lines[-1] if lines else "")
                res["error"] = (err.replace("vspyre: error: ", "", 1).strip()
                                or f"vspyre exited with status {r.returncode}")
            else:
                with open(_os.path.join(out, "stats.json"), encoding="utf-8") as f:
                    res["stats"] = json.load(f)
                res["status"] = "ok"
            rc = _os.path.join(out, "config.resolved.yaml")
            if _os.path.exists(rc):
                with open(rc, encoding="utf-8") as f:
                    res["resolved"] = f.read()
            tr = _os.path.join(out, "trace.json")
            if task.get("keep_traces") and _os.path.exists(tr):
                with open(tr, encoding="utf-8") as f:
                    res["trace"] = f.read()
        except _sp.TimeoutExpired:
            res["error"] = f"timed out after {task['timeout']:g} s"
        except OSError as e:
            res["error"] = f"cannot run {vspyre}: {e}"
        except (ValueError, KeyError) as e:
            res["error"] = f"unreadable stats.json: {e}"
    res["elapsed_s"] = round(_time.time() - t0, 3)
    return res


def flatten(node, prefix, out):
    if isinstance(node, dict):
        for k, v in node.items():
            flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            flatten(v, f"{prefix}.{i}", out)
    else:
        out[prefix] = node


def make_row(task, res):
    row = {"point": task["index"], "plan": task["plan"]["name"], "status": res["status"],
           "error": res["error"], "kernel_time_us": None, "elapsed_s": res.get("elapsed_s"),
           "key": task["key"][:16]}
    row.update(task["axes"])
    if task.get("seed") is not None:
        row["seed"] = task["seed"]
    stats = res.get("stats") or {}
    flat = {}
    for top, v in stats.items():
        # stats.json = {"run"|"probe": summary, "stats": {"card": ...}}: the counters keep
        # their own names (card.core_0.macs), the summary is prefixed run./probe. `units` (each
        # counter's unit and description) is the same text on every row: not a column.
        if top == "units":
            continue
        flatten(v, "" if top == "stats" else top, flat)
    for k, v in flat.items():
        if k not in row:
            row[k] = v
    kind = "run" if task["plan"]["kind"] == "bundle" else task["plan"]["name"]
    if kind in ("run", "probe:pt"):
        row["kernel_time_us"] = flat.get(HEADLINE[kind])
    return row


def save_point(outdir, task, res):
    """Write a finished pair under OUT/points/<key>/, result.json last and atomically."""
    d = Path(outdir) / "points" / task["key"][:16]
    d.mkdir(parents=True, exist_ok=True)
    if res.get("stats") is not None:
        (d / "stats.json").write_text(json.dumps(res["stats"], indent=1), encoding="utf-8")
    if res.get("resolved"):
        (d / "config.resolved.yaml").write_text(res["resolved"], encoding="utf-8")
    if res.get("trace"):
        (d / "trace.json").write_text(res["trace"], encoding="utf-8")
    (d / "stdout.txt").write_text(res.get("stdout", ""), encoding="utf-8")
    (d / "stderr.txt").write_text(res.get("stderr", ""), encoding="utf-8")
    row = make_row(task, res)
    meta = {"key": task["key"], "row": row, "command": res.get("command"),
            "host": res.get("host"), "plan": task["plan"], "overrides": task["overrides"]}
    tmp = d / "result.json.tmp"
    tmp.write_text(json.dumps(meta, indent=1), encoding="utf-8")
    os.replace(tmp, d / "result.json")
    return row


def load_done(outdir, task):
    f = Path(outdir) / "points" / task["key"][:16] / "result.json"
    if not f.is_file():
        return None
    try:
        meta = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if meta.get("key") != task["key"]:
        return None
    row = meta["row"]
    row["point"] = task["index"]  # the same config may sit at another index in an edited sweep
    row.update(task["axes"])  # (the seed is part of the key: the saved row has it)
    return row


# ----------------------------------------------------------------------------------------------
# Progress


def _seed_of(row):
    return f" seed {row['seed']}" if row.get("seed") is not None else ""


class Progress:
    def __init__(self, total, skipped, stream=sys.stderr, quiet=False):
        self.total, self.done, self.skipped = total, skipped, skipped
        self.failed = 0
        self.t0 = time.time()
        self.stream = stream
        self.tty = stream.isatty() and not quiet
        self.quiet = quiet
        if skipped and not quiet:
            self._line(f"{skipped} of {total} already done, skipped")

    def _line(self, s):
        if self.tty:
            self.stream.write("\r\033[K")
        self.stream.write(f"vspyre sweep: {s}\n")
        self.stream.flush()

    def eta(self):
        ran = self.done - self.skipped
        left = self.total - self.done
        if ran <= 0:
            return "?"
        s = (time.time() - self.t0) / ran * left
        return f"{s:.0f}s" if s < 120 else f"{s / 60:.1f}min"

    def update(self, row):
        self.done += 1
        if row["status"] != "ok":
            self.failed += 1
        if self.quiet:
            return
        if self.tty:
            if row["status"] != "ok":
                self._line(f"point {row['point']}{_seed_of(row)} {row['plan']}: failed: {row['error']}")
            n = 30
            fill = int(n * self.done / max(self.total, 1))
            self.stream.write(
                f"\r[{'#' * fill}{'.' * (n - fill)}] {self.done}/{self.total} "
                f"{100 * self.done // max(self.total, 1)}%  failed {self.failed}  "
                f"elapsed {time.time() - self.t0:.0f}s  ETA {self.eta()}\033[K")
            self.stream.flush()
        else:
            what = "ok" if row["status"] == "ok" else f"failed: {row['error']}"
            self._line(f"[{self.done}/{self.total}] point {row['point']}{_seed_of(row)} {row['plan']} "
                       f"{what} ({row.get('elapsed_s')}s), ETA {self.eta()}")

    def close(self):
        if self.tty and not self.quiet:
            self.stream.write("\n")
            self.stream.flush()


# ----------------------------------------------------------------------------------------------
# Executors


def run_local(todo, jobs, on_done):
    from concurrent.futures import ThreadPoolExecutor, as_completed, wait
    ex = ThreadPoolExecutor(max_workers=max(1, jobs))
    futs = {ex.submit(run_point, t): t for t in todo}
    reported = set()
    try:
        for f in as_completed(futs):
            reported.add(f)
            on_done(futs[f], f.result())
    except KeyboardInterrupt:
        # Stop starting points; keep whatever finishes (points whose vspyre got the signal too
        # come back "interrupted" and are not saved).
        for f in futs:
            f.cancel()
        ex.shutdown(wait=False, cancel_futures=True)
        try:
            wait([f for f in futs if not f.cancelled()], timeout=None)
        except KeyboardInterrupt:
            pass
        for f in futs:
            if f not in reported and f.done() and not f.cancelled() and f.exception() is None:
                on_done(futs[f], f.result())
        raise
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


def run_dask(todo, address, on_done):
    try:
        import cloudpickle
        from distributed import Client, as_completed
    except ImportError as e:
        raise SweepError(f"--scheduler needs dask.distributed ({e}); "
                         f"pip install -r scripts/requirements.txt") from e
    # Workers need not have this script on their path: ship run_point by value.
    mod = sys.modules[__name__]
    if __name__ != "__main__":
        try:
            cloudpickle.register_pickle_by_value(mod)
        except ValueError:
            pass
    try:
        client = Client(address, timeout=30)
    except (OSError, ValueError, TypeError) as e:  # ValueError: not an address Dask can parse
        raise SweepError(f"cannot reach the Dask scheduler at {address}: {e}") from e
    try:
        futs = {}
        for t in todo:
            f = client.submit(run_point, t, pure=False, retries=1)
            futs[f] = t
        for f in as_completed(list(futs)):
            t = futs[f]
            try:
                res = f.result()
            except Exception as e:  # the worker died or the task could not run there
                res = {"key": t["key"], "status": "failed", "error": f"dask: {e}",
                       "stats": None, "elapsed_s": None}
            on_done(t, res)
    finally:
        client.close()


# ----------------------------------------------------------------------------------------------
# Outputs


def ordered_columns(rows, axes, extra=()):
    cols = list(FIXED_COLUMNS) + list(extra) + [a for a in axes if a not in FIXED_COLUMNS]
    seen = set(cols)
    rest = []
    for r in rows:
        for k in r:
            if k not in seen:
                seen.add(k)
                rest.append(k)
    return cols + sorted(rest)


def write_csv(path, rows, cols):
    tmp = Path(str(path) + ".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=cols, restval="", extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if v is None else v) for k, v in r.items()})
    os.replace(tmp, path)


def write_parquet(path, rows, cols):
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return False
    data = {}
    for c in cols:
        vals = [r.get(c) for r in rows]
        present = [v for v in vals if v is not None]
        if present and all(isinstance(v, bool) for v in present):
            data[c] = pa.array(vals, pa.bool_())
        elif present and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                             for v in present):
            if all(isinstance(v, int) for v in present):
                data[c] = pa.array(vals, pa.int64())
            else:
                data[c] = pa.array([None if v is None else float(v) for v in vals], pa.float64())
        else:
            data[c] = pa.array([None if v is None else str(v) for v in vals], pa.string())
    pq.write_table(pa.table(data), str(path))
    return True


def _safe(s):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(s))


def metric_for(rows, plan, want):
    if want:
        return want
    for r in rows:
        if r["plan"] == plan and r["status"] == "ok":
            if r.get("kernel_time_us") is not None:
                return "kernel_time_us"
            for k in HEADLINE.values():
                if r.get(k) is not None:
                    return k
    return "kernel_time_us"


def _num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def write_plots(outdir, rows, sw):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    axes = list(sw["axes"])
    if not axes:
        return []
    pdir = Path(outdir) / "plots"
    pdir.mkdir(parents=True, exist_ok=True)
    made = []
    for pl in sw["plans"]:
        plan = pl["name"]
        metric = metric_for(rows, plan, sw["metric"])
        prow = [r for r in rows if r["plan"] == plan]
        for ax in axes:
            others = [a for a in axes if a != ax]
            xs = sw["axes"][ax]
            series, ranges = {}, {}
            for r in prow:
                label = ", ".join(f"{o.split('.')[-1] if o.count('.') else o}={r[o]}"
                                  for o in others)
                series.setdefault(label, {})[str(r[ax])] = _num(r.get(metric)) \
                    if r["status"] == "ok" else None
                if r["status"] == "ok" and _num(r.get(f"{metric}_min")) is not None:
                    ranges.setdefault(label, {})[str(r[ax])] = (_num(r[f"{metric}_min"]),
                                                                 _num(r[f"{metric}_max"]))
            fig, a = plt.subplots(figsize=(6.4, 4.2))
            pos = list(range(len(xs)))
            shown = list(series.items())
            if len(shown) > 10:  # too many lines: the median over the other axes
                med = []
                for x in xs:
                    v = sorted(s[str(x)] for _, s in shown if s.get(str(x)) is not None)
                    med.append(v[len(v) // 2] if v else None)
                shown = [("median over " + ", ".join(others), dict(zip(map(str, xs), med)))]
            for label, s in shown:
                ys = [s.get(str(x)) for x in xs]
                ys = [float("nan") if y is None else y for y in ys]
                rg = ranges.get(label)
                if rg:  # seeds: the range over them as error bars around the mean
                    lo = [max(0.0, y - rg[str(x)][0]) if str(x) in rg and y == y else 0 for x, y in zip(xs, ys)]
                    hi = [max(0.0, rg[str(x)][1] - y) if str(x) in rg and y == y else 0 for x, y in zip(xs, ys)]
                    a.errorbar(pos, ys, yerr=[lo, hi], marker="o", capsize=3, label=label or None)
                else:
                    a.plot(pos, ys, marker="o", label=label or None)
            a.set_xticks(pos, [str(x) for x in xs])
            a.set_xlabel(ax)
            what = ""
            if sw.get("seeds"):  # the range is drawn for the series that have one (not a median)
                drawn = any(label in ranges for label, _ in shown)
                what = f" (mean{', range' if drawn else ''} over {len(sw['seeds'])} seeds)"
            a.set_ylabel(metric + what)
            a.set_title(f"{plan}: {metric} against {ax}", fontsize=10)
            a.grid(True, alpha=0.3)
            if len(shown) > 1 or (shown and shown[0][0]):
                a.legend(fontsize=7)
            fig.tight_layout()
            f = pdir / f"{_safe(plan)}__{_safe(ax)}.png"
            fig.savefig(f, dpi=100)
            plt.close(fig)
            made.append(f)
        if len(axes) == 2:
            ax0, ax1 = axes
            xs, ys = sw["axes"][ax0], sw["axes"][ax1]
            grid = [[float("nan")] * len(xs) for _ in ys]
            for r in prow:
                try:
                    i, j = ys.index(r[ax1]), xs.index(r[ax0])
                except ValueError:
                    continue
                v = _num(r.get(metric)) if r["status"] == "ok" else None
                grid[i][j] = float("nan") if v is None else v
            fig, a = plt.subplots(figsize=(6.4, 4.8))
            im = a.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
            a.set_xticks(range(len(xs)), [str(x) for x in xs])
            a.set_yticks(range(len(ys)), [str(y) for y in ys])
            a.set_xlabel(ax0)
            a.set_ylabel(ax1)
            finite = [v for row in grid for v in row if v == v]
            mid = (min(finite) + max(finite)) / 2 if finite else 0
            for i in range(len(ys)):
                for j in range(len(xs)):
                    v = grid[i][j]
                    a.text(j, i, "failed" if v != v else f"{v:.4g}", ha="center",
                           va="center", fontsize=7, color="k" if v == v and v > mid else "w")
            fig.colorbar(im, ax=a, label=metric + (f" (mean over {len(sw['seeds'])} seeds)" if sw.get("seeds") else ""))
            a.set_title(f"{plan}: {metric}", fontsize=10)
            fig.tight_layout()
            f = pdir / f"{_safe(plan)}__heatmap.png"
            fig.savefig(f, dpi=100)
            plt.close(fig)
            made.append(f)
    return made


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _mean(vals):
    """The mean of numbers as results.csv gives it: the value itself when every seed gave the same
    (an integer stays an integer), else the correctly rounded mean held inside [min, max]."""
    if all(v == vals[0] for v in vals):
        return vals[0]
    return min(max(math.fsum(float(v) for v in vals) / len(vals), min(vals)), max(vals))


def _group_errors(errors):
    """[(seed, error)] -> 'seeds 1, 2: msg; seed 3: other' (seeds with the same error together)."""
    by = {}
    for sd, e in errors:
        by.setdefault(e, []).append(str(sd))
    return "; ".join(f"seed{'s' if len(sds) > 1 else ''} {', '.join(sds)}: {e}" for e, sds in by.items())


def aggregate_seeds(tasks, rows_by_key, axes, metrics, missing):
    """One row for a (point, plan) from its runs over the seeds (`tasks`, in the sweep's seed
    order; a run not in `rows_by_key` has not finished, and `missing` may say why). A row whose
    seeds all ran: every numeric stat the mean over them (_mean), the other columns the first
    seed's, and each of `metrics` (the headline) also its _min, _max and _spread_percent
    ((max - min) / mean). A row with a seed that failed or did not run is failed, names each such
    seed, and carries no stats, as an unseeded failed row (results_by_seed.csv keeps the runs)."""
    t0 = tasks[0]
    runs = [(t["seed"], rows_by_key.get(t["key"])) for t in tasks]
    ok = [r for _, r in runs if r is not None and r["status"] == "ok"]
    row = {"point": t0["index"], "plan": t0["plan"]["name"],
           "key": " ".join(t["key"][:16] for t in tasks),  # each seed's points/<key>/
           "elapsed_s": round(math.fsum(_num(r.get("elapsed_s")) or 0 for _, r in runs if r is not None), 3),
           "seeds": len(runs), "seeds_ok": len(ok)}
    row.update(t0["axes"])
    errors = [(sd, r["error"] if r is not None else missing.get(t["key"], "not run (the sweep was interrupted)"))
              for t, (sd, r) in zip(tasks, runs) if r is None or r["status"] != "ok"]
    row["status"] = "failed" if errors else "ok"
    row["error"] = _group_errors(errors)
    if errors:
        row["kernel_time_us"] = None
        return row
    skip = set(row) | {"seed"}
    names = []
    for r in ok:
        names += [k for k in r if k not in skip and k not in names]
    for k in names:
        vals = [r.get(k) for r in ok]
        if all(_is_number(v) for v in vals):
            row[k] = _mean(vals)
            if k in metrics:
                lo, hi = min(vals), max(vals)
                row[f"{k}_min"], row[f"{k}_max"] = lo, hi
                row[f"{k}_spread_percent"] = round((hi - lo) / row[k] * 100, 4) if row[k] else 0.0
        else:
            row[k] = vals[0]
    row.setdefault("kernel_time_us", None)
    return row


def write_outputs(outdir, sw, rows_by_key, tasks, missing=None):
    """results.csv (+ results_by_seed.csv with seeds), Parquet and plots. `missing`: why a run has
    no row (a run killed by a signal), by its key."""
    rows = [rows_by_key[t["key"]] for t in tasks if t["key"] in rows_by_key]
    out = {"csv": Path(outdir) / "results.csv"}
    extra = ()
    if not sw.get("seeds"):
        # A per-seed table from an earlier sweep into this --out would describe other results.
        (Path(outdir) / "results_by_seed.csv").unlink(missing_ok=True)
    if sw.get("seeds"):
        by_seed = Path(outdir) / "results_by_seed.csv"
        write_csv(by_seed, rows, ordered_columns(rows, sw["axes"], ["seed"]))
        out["by_seed"] = by_seed
        groups = {}
        for t in tasks:
            groups.setdefault((t["index"], t["plan"]["name"]), []).append(t)
        rows = []
        for g in groups.values():
            if not any(t["key"] in rows_by_key for t in g):
                continue
            # The range for the plan's headline: kernel_time_us for runs and the PT probe, the
            # probe's own number for the others, or the sweep's outputs.metric.
            kind = "run" if g[0]["plan"]["kind"] == "bundle" else g[0]["plan"]["name"]
            metrics = {"kernel_time_us" if kind in ("run", "probe:pt") else HEADLINE[kind]}
            if sw["metric"]:
                metrics.add(sw["metric"])
            rows.append(aggregate_seeds(g, rows_by_key, sw["axes"], metrics, missing or {}))
        extra = SEED_COLUMNS
    cols = ordered_columns(rows, sw["axes"], extra)
    write_csv(out["csv"], rows, cols)
    if "parquet" in sw["outputs"] and write_parquet(Path(outdir) / "results.parquet", rows, cols):
        out["parquet"] = Path(outdir) / "results.parquet"
    else:  # an earlier run's table would not be this one
        (Path(outdir) / "results.parquet").unlink(missing_ok=True)
    if "plots" in sw["outputs"]:
        out["plots"] = write_plots(outdir, rows, sw)
    # Plots this run did not draw (another sweep's plans or axes, or --no-plots) would show other
    # results next to results.csv.
    made = {Path(f).name for f in out.get("plots") or []}
    pdir = Path(outdir) / "plots"
    if pdir.is_dir():
        for f in pdir.glob("*.png"):
            if f.name not in made:
                f.unlink()
        if not any(pdir.iterdir()):
            pdir.rmdir()
    return rows, out


# ----------------------------------------------------------------------------------------------
# Main


# What a sweep writes in its --out besides points/: a folder holding any of them without a
# sweep.yaml is not taken for a sweep's without --replace.
OUT_NAMES = ("results.csv", "results_by_seed.csv", "results.parquet", "plots", "points")
# Written next to the copy of the sweep file: its sha256, so that a sweep.yaml is overwritten (by
# --replace) only when vspyre wrote it and nobody has changed it since.
COPY_MARK = ".vspyre-sweep.json"


def _sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _mark_of(outdir):
    """What the mark beside OUT/sweep.yaml records ({} when there is none or it is unreadable)."""
    try:
        mark = json.loads((Path(outdir) / COPY_MARK).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return mark if isinstance(mark, dict) else {}


def _copy_is_ours(outdir):
    y = Path(outdir) / "sweep.yaml"
    if y.is_symlink() or not y.is_file():
        return False
    sha = _mark_of(outdir).get("sweep_sha256")
    return sha is not None and sha == _sha256(y)


def check_outdir(outdir, sweep_path, replace=False):
    """Whether the sweep may write in OUT, before anything is written; True when OUT/sweep.yaml is
    to be (re)written with a copy of the sweep file.

    OUT/sweep.yaml says which sweep OUT's results are: the same sweep (the same bytes, or the sweep
    file is OUT/sweep.yaml itself) resumes; so does the sweep file vspyre copied there, edited since
    (a sweep grown by a few points reruns only those); another sweep's results are replaced only with
    --replace (the runs the two share are reused), and even then a sweep.yaml that vspyre did not
    write (the user's own file) is never overwritten. A folder holding results without a
    sweep.yaml is taken only with --replace."""
    outdir, src = Path(outdir), Path(sweep_path)
    y = outdir / "sweep.yaml"
    if y.is_symlink() or y.exists():
        if y.exists() and os.path.samefile(src, y):
            return False  # the sweep file is the folder's own: nothing to copy
        if y.is_file() and not y.is_symlink() and y.read_bytes() == src.read_bytes():
            return False  # the same sweep: resume
        ours = _copy_is_ours(outdir)
        if ours and _mark_of(outdir).get("source") == str(src.resolve()):
            return True  # the same sweep file, edited since (grown, say): its folder; the shared runs are reused
        if not replace:
            raise SweepError(f"--out: {outdir} holds the results of another sweep ({y} differs from {src}); "
                             f"use another --out (or name:), or pass --replace to replace them with this "
                             f"sweep's (the runs the two share are reused)")
        if not ours:
            raise SweepError(f"--out: {y} was not written by vspyre sweep (or was changed since), so --replace "
                             f"does not overwrite it: move it away or use another --out")
        return True
    present = [n for n in OUT_NAMES if (outdir / n).exists()]
    if present and not replace:
        raise SweepError(f"--out: {outdir} holds {', '.join(present)} but no sweep.yaml naming the sweep "
                         f"they are from; use another --out, or pass --replace to replace them with this "
                         f"sweep's")
    return True


def save_sweep_copy(outdir, sweep_path):
    """OUT/sweep.yaml, a copy of the sweep file, and the mark that says vspyre wrote it."""
    y = Path(outdir) / "sweep.yaml"
    tmp = Path(outdir) / "sweep.yaml.tmp"
    shutil.copyfile(sweep_path, tmp)
    os.replace(tmp, y)
    mark = Path(outdir) / COPY_MARK
    mark.write_text(json.dumps({"sweep_sha256": _sha256(y), "source": str(Path(sweep_path).resolve())}) + "\n",
                    encoding="utf-8")


SCHEDULER_SCHEMES = ("tcp", "tls", "ucx", "ws", "wss", "inproc")


def check_scheduler(address):
    """A Dask scheduler address: [PROTOCOL://]HOST[:PORT] (tcp when no protocol is given, as Dask
    reads it), or inproc://... as Dask writes it. Anything else is refused before the sweep starts."""
    from urllib.parse import urlsplit
    ok = bool(address) and not any(c.isspace() for c in address)
    if ok and address.startswith("inproc://"):
        ok = len(address) > len("inproc://")
    elif ok:
        try:
            u = urlsplit(address if "://" in address else "tcp://" + address)
            ok = u.scheme in SCHEDULER_SCHEMES and bool(u.hostname) and u.port is not None and u.port > 0 \
                and u.path in ("", "/")
        except ValueError:  # a port that is not a number
            ok = False
    if not ok:
        raise SweepError(f"--scheduler: expected a Dask scheduler address with its port, such as tcp://HOST:8786 or HOST:8786 "
                         f"(protocols: {', '.join(SCHEDULER_SCHEMES)}), got '{address}'")


def run_sweep(sweep_file, vspyre=None, out=None, jobs=None, scheduler=None, retry_failed=False,
              keep_traces=False, plots=True, quiet=False, list_only=False, seeds=None, replace=False):
    if scheduler:
        check_scheduler(scheduler)
    vspyre = vspyre or find_vspyre()
    if not (os.path.isfile(vspyre) or shutil.which(vspyre)):
        raise SweepError(f"vspyre binary {vspyre} does not exist")
    sw = load_sweep(sweep_file, vspyre)
    if seeds is not None:  # --seeds: replaces the file's
        sw["seeds"] = parse_seeds(parse_seeds_arg(seeds) if isinstance(seeds, str) else seeds, "--seeds")
        check_seed_conflict(sw["seeds"], sw["axes"], sw["set"], f"--seeds (with {sw['path']})")
    if not plots:
        sw["outputs"].discard("plots")
    tasks = make_tasks(sw, vspyre, keep_traces)
    if list_only:
        for t in tasks:
            print(t["index"], t["plan"]["name"], t["key"][:16],
                  " ".join(f"{k}={v}" for k, v in t["overrides"].items()))
        return None
    outdir = Path(out or Path("sweeps") / _safe(sw["name"]))
    if outdir.exists() and not outdir.is_dir():
        raise SweepError(f"--out: {outdir} exists and is not a directory")
    copy = check_outdir(outdir, sw["path"], replace)
    try:
        outdir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SweepError(f"--out: cannot create {outdir}: {e.strerror or e}") from e
    if copy:
        save_sweep_copy(outdir, sw["path"])
    rows, todo = {}, []
    for t in tasks:
        r = load_done(outdir, t)
        if r is not None and (r["status"] == "ok" or not retry_failed):
            rows[t["key"]] = r
        else:
            todo.append(t)
    prog = Progress(len(tasks), len(tasks) - len(todo), quiet=quiet)
    jobs = jobs or sw["jobs"] or os.cpu_count() or 1

    missing = {}  # why a run has no row: vspyre stopped by a signal (the next sweep runs it again)

    def on_done(t, res):
        if res["status"] == "interrupted":  # not done: the next run does it again
            prog.total -= 1
            missing[t["key"]] = f"not run: {res['error']} (the next sweep runs it again)"
            return
        rows[t["key"]] = save_point(outdir, t, res)
        prog.update(rows[t["key"]])

    interrupted = False
    try:
        if todo:
            if scheduler:
                run_dask(todo, scheduler, on_done)
            else:
                run_local(todo, int(jobs), on_done)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        prog.close()
    rows_list, outputs = write_outputs(outdir, sw, rows, tasks, missing)
    failed = sum(1 for r in rows_list if r["status"] != "ok")
    if not quiet:
        where = ", ".join(str(v) for k, v in outputs.items() if k != "plots")
        nplots = len(outputs.get("plots") or [])
        ran = sum(1 for t in tasks if t["key"] in rows) - prog.skipped
        todo_keys = {t["key"] for t in todo}
        kept_failed = sum(1 for t in tasks if t["key"] in rows and rows[t["key"]]["status"] != "ok"
                          and t["key"] not in todo_keys)
        runs = f" ({len(tasks)} runs: {len(sw['seeds'])} seeds a row)" if sw.get("seeds") else ""
        nrows = len(tasks) // len(sw["seeds"]) if sw.get("seeds") else len(tasks)
        sys.stderr.write(
            f"vspyre sweep: {len(rows_list)} of {nrows} rows{runs}, {len(rows_list) - failed} ok and {failed} failed; "
            f"{ran} run now, {prog.skipped} kept from an earlier run"
            + (f" ({kept_failed} of them failed: --retry-failed runs them again)" if kept_failed else "")
            + f", in {time.time() - prog.t0:.1f}s; "
            f"{where}" + (f"; {nplots} plots in {outdir / 'plots'}" if nplots else "") + "\n")
        if interrupted:
            sys.stderr.write("vspyre sweep: interrupted; run the same command again to finish "
                             "(what finished is kept)\n")
    if interrupted:
        raise KeyboardInterrupt
    return {"outdir": outdir, "rows": rows_list, "outputs": outputs, "failed": failed,
            "skipped": prog.skipped, "total": len(tasks)}


def list_failed(r):
    """Whether any point of a finished sweep (run_sweep's result) failed, now or kept from before."""
    return bool(r and r.get("failed"))


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="vspyre sweep",
        description="Run a what-if sweep: every point of the sweep file's axes over every plan.")
    ap.add_argument("sweep", help="sweep file (configs/sweeps/*.yaml)")
    ap.add_argument("--jobs", "-j", type=int, help="points run at once (default: the sweep file's jobs:, else all cores)")
    ap.add_argument("--out", "-o", help="output directory (default: sweeps/<sweep name>)")
    ap.add_argument("--scheduler", help="run on a Dask distributed cluster: tcp://HOST:PORT")
    ap.add_argument("--vspyre", metavar="PATH",
                    help="the vspyre binary each point runs. `vspyre sweep` passes the binary it was run as, "
                         "so $VSPYRE_BIN is not read there (a --vspyre of your own still wins); "
                         "run as python3 scripts/vspyre_sweep.py without --vspyre: $VSPYRE_BIN, else vspyre "
                         "on PATH, else the newest build/*/cli/vspyre. $VSPYRE_WORKER_BIN on a Dask worker "
                         "overrides it there")
    ap.add_argument("--retry-failed", action="store_true", help="rerun points that failed before")
    ap.add_argument("--replace", action="store_true",
                    help="the output directory holds another sweep's results (its sweep.yaml differs from "
                         "this sweep file): replace them with this sweep's, reusing the runs the two share "
                         "(without it the sweep refuses; a sweep.yaml vspyre did not write is never "
                         "overwritten)")
    ap.add_argument("--keep-traces", action="store_true", help="keep each point's trace.json")
    ap.add_argument("--seeds", metavar="N|SEED,SEED...",
                    help="run every point once per card.launch_seed: N for the seeds 1 .. N, or a list (7, for "
                         "seed 7 alone); replaces the sweep file's seeds:. results.csv holds the mean and the "
                         "headline's range over them")
    ap.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    ap.add_argument("--list", action="store_true", help="print the points and exit")
    ap.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    a = ap.parse_args(argv)
    if a.jobs is not None and a.jobs < 1:
        ap.error("--jobs must be at least 1")
    seeds = a.seeds
    try:
        r = run_sweep(a.sweep, vspyre=a.vspyre, out=a.out, jobs=a.jobs, scheduler=a.scheduler,
                      retry_failed=a.retry_failed, keep_traces=a.keep_traces,
                      plots=not a.no_plots, quiet=a.quiet, list_only=a.list, seeds=seeds,
                      replace=a.replace)
    except SweepError as e:
        sys.stderr.write(f"vspyre sweep: error: {e}\n")
        return 2
    except BrokenPipeError:  # --list | head (before OSError, of which it is one)
        sys.stdout = None
        return 0
    except OSError as e:  # the filesystem under --out: a full disk, no permission
        where = f"{e.filename}: " if e.filename else ""
        sys.stderr.write(f"vspyre sweep: error: {where}{e.strerror or e}\n")
        return 2
    except KeyboardInterrupt:
        return 130
    if list_failed(r):
        # The results are written either way; the exit status says whether every point ran, so
        # that a script or CI does not take a sweep of failures for a result.
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
