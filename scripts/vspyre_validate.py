#!/usr/bin/env python3
"""vspyre validate: compare vspyre's kernel times with public Spyre hardware measurements.

    vspyre validate [--table FILE] [--config FILE] [--json] [--out DIR] [--jobs N]
                    [--write-baseline [FILE]] [--check-baseline FILE] [--tolerance POINTS]
    python3 scripts/vspyre_validate.py [...] [--vspyre PATH/TO/vspyre]

`vspyre validate` runs this script with --vspyre set to the binary it was run as ($VSPYRE_BIN is
read only when the script is run on its own without --vspyre).

The table (default bench/validation/measured.yaml; its header documents the row fields) lists
measured kernels (type M), ratio-only measurements (M-ratio) and other models' predictions (P).
Every row with a bundle fixture is run once with `vspyre run FIXTURE --config F --json --no-data`.

- M rows: predicted against measured time, error = (predicted - measured) / measured. MAPE, worst
  error, Pearson (linear and log-log) and Spearman correlation and the bias (geometric mean of
  predicted / measured) are taken over these rows only.
- M-ratio rows: the predicted ratio of two rows' times against the measured ratio, and whether
  the direction of the change (faster / same / slower, within --same-band) is reproduced.
- P rows: run and listed next to the other model's figure, never counted.
- By section and by workload (the row's `workload` text): MAPE, bias and rows worse than 25 %
  per group; a workload's `mape_points` is its share of the headline MAPE (the groups' points add
  up to it), so the report lists first the workloads that cost the most.
- Range rows (M with `measured_range_us: [lo, hi]`, a family of geometries measured only as a
  range): `fixture` may be a list; the row is reproduced when every fixture's prediction falls
  inside [lo, hi]. Never counted in MAPE.

Writes OUT/validation.csv (one line per row) and OUT/validation.png (predicted vs measured,
log-log, identity line) and OUT/validation.json. --json prints that JSON object instead of the
text report. --write-baseline records the summary in bench/validation/baseline.json;
--check-baseline FILE exits 1 when MAPE rises more than --tolerance points (default 1) above it
or a fixture fails to run, and notes how many rows' predictions moved by more than 5 % since the
baseline (naming the five that moved most), so that a change which reshuffles rows while MAPE
holds still is seen.

No output overwrites an input or another output: --write-baseline or --out's files naming the
table, the config or the --check-baseline file (also through a hard link or a symlink), or each
other, are refused before anything runs. Exit status: 0; 1 when a fixture fails or the baseline
check does; 2 for a usage error (a bad argument, table, config or baseline); 130 on Ctrl-C.

The simulation stays in C++; this script only orchestrates. Standard library + PyYAML;
matplotlib for the plot (skipped with a note when it is missing or with --no-plot).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import csv
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from vspyre_yaml import UniqueKeyLoader

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TABLE = ROOT / "bench" / "validation" / "measured.yaml"
DEFAULT_BASELINE = ROOT / "bench" / "validation" / "baseline.json"
DEFAULT_CONFIG = ROOT / "configs" / "spyre.yaml"
TYPES = ("M", "M-ratio", "P")
ROW_KEYS = {"id", "section", "workload", "shapes", "dtype", "cores", "layout", "lx", "split",
            "type", "measured_us", "measured_range_us", "predicted_us", "measured_ratio",
            "numerator", "denominator", "source", "fixture", "generated_fixture", "captured_fixture",
            "metric", "repeat", "other_model", "other_model_us", "note"}
CSV_COLUMNS = ["id", "section", "type", "unit", "measured", "predicted", "error_percent",
               "counted", "direction_measured", "direction_predicted", "direction_reproduced",
               "status", "other_model_us", "fixture", "metric", "numerator", "denominator",
               "workload", "shapes", "cores", "lx", "source"]


class ValidateError(Exception):
    """A problem with the table, the baseline or the vspyre binary."""


# ----------------------------------------------------------------------------------------------
# Statistics


def mape(pred, meas):
    """Mean absolute percentage error of pred against meas (percent)."""
    if not pred or len(pred) != len(meas):
        raise ValueError("mape needs two non-empty lists of equal length")
    return 100.0 * sum(abs(p - m) / abs(m) for p, m in zip(pred, meas)) / len(pred)


def pearson(x, y):
    """Pearson correlation; None when either side is constant or there are < 2 points."""
    n = len(x)
    if n != len(y) or n < 2:
        return None
    mx, my = sum(x) / n, sum(y) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def ranks(v):
    """1-based ranks, ties given the mean of the ranks they span."""
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r


def spearman(x, y):
    """Spearman rank correlation (Pearson of the tie-averaged ranks)."""
    return pearson(ranks(x), ranks(y))


def direction(ratio, band):
    """'faster' / 'same' / 'slower' for a time ratio new/old, 'same' within +-band (fraction)."""
    if ratio < 1 / (1 + band):
        return "faster"
    if ratio > 1 + band:
        return "slower"
    return "same"


def summarize(pred, meas, ids):
    """The headline statistics of the counted (M) rows."""
    if not pred:
        return {"n": 0, "mape_percent": None, "max_error_percent": None, "max_error_row": None,
                "pearson": None, "pearson_log": None, "spearman": None,
                "mean_signed_error_percent": None, "bias_geomean_ratio": None, "bias_sign": None}
    errs = [100.0 * (p - m) / m for p, m in zip(pred, meas)]
    worst = max(range(len(errs)), key=lambda i: abs(errs[i]))
    geo = math.exp(sum(math.log(p / m) for p, m in zip(pred, meas)) / len(pred))
    return {
        "n": len(pred),
        "mape_percent": mape(pred, meas),
        "max_error_percent": abs(errs[worst]),
        "max_error_row": ids[worst],
        "pearson": pearson(pred, meas),
        "pearson_log": pearson([math.log10(p) for p in pred], [math.log10(m) for m in meas]),
        "spearman": spearman(pred, meas),
        "mean_signed_error_percent": sum(errs) / len(errs),
        "bias_geomean_ratio": geo,
        "bias_sign": "+" if geo > 1 else ("-" if geo < 1 else "0"),
    }


# ----------------------------------------------------------------------------------------------
# The table


def _num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def split_mismatch(split, bundle_dir):
    """A row's recorded `split` ("MxN": cores over M and over N of a matmul) against the work
    division of its fixture's first SDSC (`numWkSlicesPerDim_`, dims `mb` and `out`).

    Returns None when they agree, else one sentence saying what differs: a row must be predicted
    from the configuration that was measured, not from another one the compiler chooses today.
    """
    m = re.fullmatch(r"\s*(\d+)\s*x\s*(\d+)\s*", str(split))
    if not m:
        return f"`split` must be written MxN (cores over M and over N), not {split!r}"
    want = {"mb": int(m.group(1)), "out": int(m.group(2))}
    sdscs = sorted(bundle_dir.glob("sdsc_*.json"))
    if not sdscs:
        return f"`split` {split} given but fixture {bundle_dir} has no sdsc_*.json to compare"
    try:
        text = sdscs[0].read_text()
    except OSError as e:
        return f"cannot read {sdscs[0]}: {e.strerror}"
    found = re.search(r'"numWkSlicesPerDim_"\s*:\s*(\{[^{}]*\})', text)
    if not found:
        return f"`split` {split} given but {sdscs[0]} has no numWkSlicesPerDim_"
    try:
        have = json.loads(found.group(1))
    except ValueError:
        return f"{sdscs[0]}: numWkSlicesPerDim_ is not a JSON object"
    got = {k: int(have.get(k, 1)) for k in want}
    if got != want:
        return (f"`split` {split} (mb={want['mb']}, out={want['out']}) but fixture {bundle_dir.name} "
                f"divides the work mb={got['mb']}, out={got['out']}: use a fixture with the "
                f"measured split")
    return None


def load_table(path):
    """Read and check the table; returns the list of row dicts (with '_line' and '_index').

    Every problem raises ValidateError naming the file, the row (1-based, its id and its line).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ValidateError(f"{path}: cannot read the table: {e.strerror}") from e
    except UnicodeDecodeError as e:
        raise ValidateError(f"{path}: not a UTF-8 text file (byte {e.start}): not a measurement table") from e
    try:
        doc = yaml.load(text, Loader=UniqueKeyLoader)  # a key given twice (a row's `measured`) is refused
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.constructor.ConstructorError as e:
        m = e.problem_mark
        raise ValidateError(f"{path}:{m.line + 1}:{m.column + 1}: {e.problem}" if m else f"{path}: {e.problem}") from e
    except yaml.YAMLError as e:
        raise ValidateError(f"{path}: not valid YAML: {e}") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list) or not doc["rows"]:
        raise ValidateError(f"{path}: the table must be a mapping with a non-empty list `rows`")
    if doc.get("schema", 1) != 1:
        raise ValidateError(f"{path}: `schema: {doc.get('schema')}` is not a table this script reads (schema 1)")
    lines = []
    for k, v in node.value:
        if k.value == "rows":
            lines = [n.start_mark.line + 1 for n in v.value]
    rows, seen = [], {}
    for i, r in enumerate(doc["rows"]):
        line = lines[i] if i < len(lines) else None
        where = f"{path}: row {i + 1}" + (f" (line {line})" if line else "")
        if not isinstance(r, dict):
            raise ValidateError(f"{where}: a row must be a mapping, not {type(r).__name__}")
        rid = r.get("id")
        if not isinstance(rid, str) or not rid:
            raise ValidateError(f"{where}: missing `id`")
        where += f", id {rid!r}"

        def bad(msg):
            raise ValidateError(f"{where}: {msg}")

        if rid in seen:
            bad(f"duplicate id (first used in row {seen[rid] + 1})")
        seen[rid] = i
        unknown = sorted(set(r) - ROW_KEYS)
        if unknown:
            bad(f"unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(ROW_KEYS))})")
        t = r.get("type")
        if t not in TYPES:
            bad(f"`type` must be one of {', '.join(TYPES)}, not {t!r}")
        for k in ("measured_us", "predicted_us", "measured_ratio"):
            if k in r and r[k] is not None and not (_num(r[k]) and r[k] > 0):
                bad(f"`{k}` must be a positive number, not {r[k]!r}")
        if t == "M":
            rng = r.get("measured_range_us")
            if r.get("measured_us") is None:
                if not (isinstance(rng, list) and len(rng) == 2 and all(_num(x) and x > 0 for x in rng)):
                    bad("an M row needs `measured_us` (or `measured_range_us: [lo, hi]`)")
                if rng[0] > rng[1]:
                    bad(f"`measured_range_us` {rng} is not [lo, hi] with lo <= hi")
            if r.get("predicted_us") is not None:
                bad("an M row carries `measured_us`; `predicted_us` is for P rows (another model's "
                    "prediction of a measured row is `other_model_us`)")
            om = r.get("other_model_us")
            if om is not None and not (_num(om) and om > 0):
                bad(f"`other_model_us` must be a positive number, not {om!r}")
            if (r.get("other_model") is None) != (om is None):
                bad("`other_model` (its name) and `other_model_us` (its prediction) go together")
        elif t == "P":
            if r.get("predicted_us") is None:
                bad("a P row needs `predicted_us` (the other model's prediction)")
            if r.get("measured_us") is not None:
                bad("a P row is a prediction: give `predicted_us`, not `measured_us`")
        else:
            has_pair = r.get("numerator") is not None or r.get("denominator") is not None
            if has_pair and not (isinstance(r.get("numerator"), str)
                                 and isinstance(r.get("denominator"), str)):
                bad("an M-ratio row needs both `numerator` and `denominator` (row ids)")
            if not has_pair and r.get("measured_ratio") is None:
                bad("an M-ratio row needs `measured_ratio` or `numerator` and `denominator`")
            if r.get("fixture") is not None:
                bad("an M-ratio row has no fixture of its own: name two rows as numerator/denominator")
        fx = r.get("fixture")
        if isinstance(fx, list):
            if not is_range_row(r):
                bad("a list of fixtures is only for an M row with `measured_range_us` (a range row)")
            if not fx or not all(isinstance(f, str) for f in fx) or len(set(fx)) != len(fx):
                bad(f"`fixture` must be a non-empty list of distinct directory paths, not {fx!r}")
        elif fx is not None and not isinstance(fx, str):
            bad(f"`fixture` must be a directory path, a list of them (range rows) or null, not {fx!r}")
        for f in fixture_list(fx):
            d = Path(f) if os.path.isabs(f) else ROOT / f
            if not any((d / n).is_file() for n in ("bundle.mlir", "bundle.mlir.ref")):
                bad(f"fixture {f} is not a bundle directory (no {d / 'bundle.mlir'} "
                    f"and no bundle.mlir.ref)")
        if r.get("split") is not None and isinstance(fx, str):
            problem = split_mismatch(r["split"], Path(fx) if os.path.isabs(fx) else ROOT / fx)
            if problem:
                bad(problem)
        rep = r.get("repeat", 1)
        if not (isinstance(rep, int) and not isinstance(rep, bool) and rep >= 1):
            bad(f"`repeat` must be a whole number of launches >= 1, not {rep!r}")
        if rep != 1 and (t != "M" or not isinstance(fx, str)):
            bad("`repeat` is for an M row with one fixture (the measured time is that many launches of it)")
        m = r.get("metric", "kernel")
        if not (m == "kernel" or (isinstance(m, str) and m.startswith("stage:") and len(m) > 6)):
            bad(f"`metric` must be `kernel` or `stage:<name>`, not {m!r}")
        row = dict(r)
        row["section"] = str(r.get("section", ""))
        row["_line"], row["_index"], row["_where"] = line, i, where
        rows.append(row)
    by_id = {r["id"]: r for r in rows}
    for r in rows:
        if r["type"] != "M-ratio" or r.get("numerator") is None:
            continue
        for k in ("numerator", "denominator"):
            o = by_id.get(r[k])
            if o is None:
                raise ValidateError(f"{r['_where']}: {k} {r[k]!r} is not a row id of the table")
            if is_range_row(o):
                raise ValidateError(f"{r['_where']}: {k} {r[k]!r} is a range row (no single time)")
            if o["type"] != "M" or o.get("measured_us") is None:
                if r.get("measured_ratio") is None:
                    raise ValidateError(f"{r['_where']}: {k} {r[k]!r} is not an M row with "
                                        f"`measured_us`; give `measured_ratio`")
    return rows


# ----------------------------------------------------------------------------------------------
# Running vspyre


def is_range_row(r):
    """An M row measured only as a range: `measured_range_us` and no `measured_us`."""
    return r.get("type") == "M" and r.get("measured_us") is None and r.get("measured_range_us") is not None


def fixture_list(fx):
    """A row's `fixture` as a list: [] for null, [path] for one path, the list itself."""
    if fx is None:
        return []
    return list(fx) if isinstance(fx, list) else [fx]


def find_vspyre():
    """$VSPYRE_BIN, build/release/cli/vspyre, `vspyre` on PATH, the newest build/*/cli/vspyre."""
    if os.environ.get("VSPYRE_BIN"):
        return os.environ["VSPYRE_BIN"]
    rel = ROOT / "build" / "release" / "cli" / "vspyre"
    if rel.is_file():
        return str(rel)
    w = shutil.which("vspyre")
    if w:
        return w
    found = sorted(ROOT.glob("build/*/cli/vspyre"), key=lambda p: p.stat().st_mtime)
    if found:
        return str(found[-1])
    raise ValidateError("cannot find the vspyre binary: pass --vspyre or set VSPYRE_BIN")


def fixture_dir(fx):
    return str(Path(fx) if os.path.isabs(fx) else ROOT / fx)


def check_config(vspyre, config):
    """The card the config describes, built once before any fixture runs: a bad config is one
    error, not the same error on every row."""
    try:
        r = subprocess.run([vspyre, "describe", "--config", str(config), "--json"], capture_output=True,
                           text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ValidateError(f"cannot run {vspyre} describe: {e}") from e
    if r.returncode != 0:
        err = r.stderr.strip().splitlines()
        raise ValidateError((err[-1].replace("vspyre: error: ", "", 1) if err else
                             f"{config}: vspyre describe exited with status {r.returncode}"))


def run_fixture(vspyre, fixture, config, timeout):
    """One `vspyre run`: returns (stats dict or None, error text or None, elapsed s)."""
    cmd = [vspyre, "run", fixture_dir(fixture), "--config", str(config), "--json", "--no-data"]
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s", time.monotonic() - t0
    except OSError as e:
        return None, f"cannot run {vspyre}: {e.strerror}", time.monotonic() - t0
    dt = time.monotonic() - t0
    if r.returncode != 0:
        err = r.stderr.strip().splitlines()
        msg = err[-1].replace("vspyre: error: ", "", 1) if err else ""
        if r.returncode < 0:
            msg = f"vspyre crashed (signal {-r.returncode}) {msg}".strip()
        return None, msg or f"vspyre exited with status {r.returncode}", dt
    try:
        return json.loads(r.stdout), None, dt
    except ValueError:
        return None, "vspyre printed no JSON object", dt


def metric_value(stats, metric):
    """kernel_time_us, or the time of the one stage whose name contains the given text."""
    if metric in (None, "kernel"):
        return stats["kernel_time_us"]
    want = metric[len("stage:"):]
    hits = [s for s in stats.get("stages", []) if want in s.get("name", "")]
    if len(hits) != 1:
        names = ", ".join(s.get("name", "?") for s in stats.get("stages", []))
        raise ValidateError(f"metric {metric!r} matches {len(hits)} stages (stages: {names})")
    return hits[0]["time_us"]


def vspyre_version(vspyre):
    try:
        r = subprocess.run([vspyre, "--version"], capture_output=True, text=True, timeout=30)
        return r.stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return None


# ----------------------------------------------------------------------------------------------
# Validation


def rows_over_25(rows):
    """How many of these counted rows vspyre misses by more than 25 %."""
    return sum(1 for o in rows if abs(o["error_percent"]) > 25)


def validate(table, config=None, vspyre=None, jobs=None, timeout=1800, band=0.05, select=None,
             progress=None, before_run=None):
    """Run every fixture of the table; returns the result dict (the --json object). `before_run`
    is called once the config, the table and the selection are checked, before any fixture runs."""
    config = Path(config) if config else DEFAULT_CONFIG
    if not config.is_file():
        raise ValidateError(f"{config}: no such config file")
    vspyre = vspyre or find_vspyre()
    if not (os.path.isfile(vspyre) or shutil.which(vspyre)):
        raise ValidateError(f"vspyre binary {vspyre} does not exist")
    check_config(vspyre, config)
    rows = load_table(table)
    by_id = {r["id"]: r for r in rows}
    if select:
        try:
            pat = re.compile(select)
        except re.error as e:
            raise ValidateError(f"--rows: '{select}' is not a regular expression: {e}") from e
        keep = {r["id"] for r in rows if pat.search(r["id"]) or pat.fullmatch(r["section"])}
        if not keep:
            raise ValidateError(f"--rows: no row's id or section matches '{select}'")
        for r in rows:  # a ratio needs its two rows
            if r["id"] in keep and r["type"] == "M-ratio" and r.get("numerator"):
                keep |= {r["numerator"], r["denominator"]}
        rows = [r for r in rows if r["id"] in keep]
    fixtures = sorted({f for r in rows for f in fixture_list(r.get("fixture"))})
    if before_run:
        before_run()
    # Longest first (the committed baseline's kernel times stand in for simulation cost), so the
    # slow matmuls do not start last.
    try:
        prev = json.loads(DEFAULT_BASELINE.read_text()).get("rows", {})
        cost = {}
        for r in rows:
            for f in fixture_list(r.get("fixture")):
                c = (prev.get(r["id"]) or {}).get("predicted_us") or 0.0
                cost[f] = max(cost.get(f, 0.0), c)
        fixtures.sort(key=lambda fx: -cost.get(fx, 0.0))
    except (OSError, ValueError, AttributeError):
        pass
    runs = {}
    jobs = max(1, jobs or os.cpu_count() or 1)
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as ex:
        futs = {ex.submit(run_fixture, vspyre, fx, config, timeout): fx for fx in fixtures}
        for n, f in enumerate(concurrent.futures.as_completed(futs), 1):
            fx = futs[f]
            runs[fx] = f.result()
            if progress:
                progress(f"{n}/{len(fixtures)} {fx} ({runs[fx][2]:.1f} s)"
                         + (f": {runs[fx][1]}" if runs[fx][1] else ""))
    out_rows, failed = [], []
    values = {}  # row id -> vspyre's time
    for r in rows:
        o = {k: r.get(k) for k in ("id", "section", "type", "workload", "shapes", "cores", "lx",
                                   "fixture", "numerator", "denominator", "source", "note")}
        o["repeat"] = r.get("repeat", 1)
        o["metric"] = r.get("metric", "kernel")
        o["counted"] = False
        if r["type"] == "M-ratio":
            out_rows.append(o)
            continue
        o["unit"] = "us"
        o["measured"] = r.get("measured_us")
        if r.get("measured_range_us"):
            o["measured_range_us"] = r["measured_range_us"]
        o["other_model_us"] = r.get("predicted_us") if r["type"] == "P" else r.get("other_model_us")
        if r["type"] == "M" and r.get("other_model"):
            o["other_model"] = r["other_model"]
        if not r.get("fixture"):
            o["status"] = "no fixture"
            out_rows.append(o)
            continue
        if is_range_row(r):
            range_row(o, r, runs, failed)
            out_rows.append(o)
            continue
        stats, err, dt = runs[r["fixture"]]
        o["elapsed_s"] = round(dt, 3)
        if err is None:
            try:
                # `repeat`: the measurement is that many launches of the kernel, one after the other
                o["predicted"] = metric_value(stats, o["metric"]) * o["repeat"]
            except (ValidateError, KeyError, TypeError) as e:
                err = f"{e}"
        if err is not None:
            o["status"] = "error: " + err
            failed.append({"id": r["id"], "fixture": r["fixture"], "error": err})
            out_rows.append(o)
            continue
        o["status"] = "ok"
        values[r["id"]] = o["predicted"]
        if r["type"] == "M" and o["measured"] is not None:
            o["error_percent"] = 100.0 * (o["predicted"] - o["measured"]) / o["measured"]
            o["counted"] = True
        elif r["type"] == "P":
            o["error_percent_vs_other_model"] = (100.0 * (o["predicted"] - o["other_model_us"])
                                                 / o["other_model_us"])
        out_rows.append(o)
    # ratios
    for o in out_rows:
        if o["type"] != "M-ratio":
            continue
        r = by_id[o["id"]]
        o["unit"] = "ratio"
        num, den = r.get("numerator"), r.get("denominator")
        if r.get("measured_ratio") is not None:
            o["measured"] = r["measured_ratio"]
        elif num:
            o["measured"] = by_id[num]["measured_us"] / by_id[den]["measured_us"]
        if not num:
            o["status"] = "no fixture"
            continue
        if num not in values or den not in values:
            miss = [x for x in (num, den) if x not in values]
            o["status"] = "error: no vspyre time for " + ", ".join(miss)
            continue
        o["status"] = "ok"
        o["predicted"] = values[num] / values[den]
        o["error_percent"] = 100.0 * (o["predicted"] - o["measured"]) / o["measured"]
        o["direction_measured"] = direction(o["measured"], band)
        o["direction_predicted"] = direction(o["predicted"], band)
        o["direction_reproduced"] = o["direction_measured"] == o["direction_predicted"]
    counted = [o for o in out_rows if o["counted"]]
    summary = summarize([o["predicted"] for o in counted], [o["measured"] for o in counted],
                        [o["id"] for o in counted])
    sections = {}
    for s in dict.fromkeys(o["section"] for o in counted):
        c = [o for o in counted if o["section"] == s]
        sections[s] = {"n": len(c), "mape_percent": mape([o["predicted"] for o in c],
                                                         [o["measured"] for o in c]),
                       "bias_geomean_ratio": math.exp(sum(math.log(o["predicted"] / o["measured"])
                                                          for o in c) / len(c))}
    # By workload (the table's `workload` text): where the headline error comes from. `mape_points`
    # is the group's share of the headline MAPE (its absolute errors over all counted rows), so the
    # groups' points add up to the MAPE.
    workloads = {}
    for name in dict.fromkeys((o.get("workload") or "").strip() for o in counted):
        c = [o for o in counted if (o.get("workload") or "").strip() == name]
        worst = max(c, key=lambda o: abs(o["error_percent"]))
        workloads[name] = {
            "n": len(c),
            "mape_percent": mape([o["predicted"] for o in c], [o["measured"] for o in c]),
            "mean_signed_error_percent": sum(o["error_percent"] for o in c) / len(c),
            "rows_over_25_percent": rows_over_25(c),
            "mape_points": sum(abs(o["error_percent"]) for o in c) / len(counted),
            "worst_row": worst["id"],
            "worst_error_percent": worst["error_percent"],
        }
    # another model's predictions of measured rows, against vspyre's on the same rows
    other = {}
    for name in dict.fromkeys(o["other_model"] for o in counted if o.get("other_model")):
        c = [o for o in counted if o.get("other_model") == name]
        other[name] = {"n": len(c),
                       "mape_percent": mape([o["other_model_us"] for o in c], [o["measured"] for o in c]),
                       "vspyre_mape_percent": mape([o["predicted"] for o in c], [o["measured"] for o in c]),
                       "rows_over_25_percent": sum(1 for o in c if abs(o["other_model_us"] - o["measured"])
                                                   > 0.25 * o["measured"]),
                       "vspyre_rows_over_25_percent": rows_over_25(c)}
    ratios = [o for o in out_rows if o["type"] == "M-ratio" and o.get("status") == "ok"]
    ranges = [o for o in out_rows if "in_range" in o]
    res = {
        "table": _rel(table), "config": _rel(config), "vspyre": vspyre, "select": select,
        "vspyre_version": vspyre_version(vspyre),
        "same_band_percent": 100.0 * band,
        **{k: v for k, v in summary.items() if k != "n"},
        "n_counted": summary["n"],
        "n_rows": len(out_rows),
        "n_predictions": sum(1 for o in out_rows if o["type"] == "P"),
        "n_not_run": sum(1 for o in out_rows if o.get("status") == "no fixture"),
        "sections": sections,
        # each section weighs the same, however many rows it has (a source with hundreds of rows
        # cannot carry the headline alone)
        "mape_section_mean_percent": (sum(v["mape_percent"] for v in sections.values()) / len(sections)
                                      if sections else None),
        "workloads": dict(sorted(workloads.items(), key=lambda kv: -kv[1]["mape_points"])),
        "other_models": other,
        "ratio": {
            "n": len(ratios),
            "mape_percent": mape([o["predicted"] for o in ratios],
                                 [o["measured"] for o in ratios]) if ratios else None,
            "directions_reproduced": sum(1 for o in ratios if o["direction_reproduced"]),
            "directions_total": len(ratios),
            "not_reproduced": [o["id"] for o in ratios if not o["direction_reproduced"]],
        },
        "range": {
            "n": len(ranges),
            "reproduced": sum(1 for o in ranges if o["range_reproduced"]),
            "not_reproduced": [o["id"] for o in ranges if not o["range_reproduced"]],
        },
        "failed": failed,
        "elapsed_s": round(time.monotonic() - t0, 1),
        "rows": out_rows,
    }
    return res


def range_row(o, r, runs, failed):
    """A range row: every fixture's prediction against [lo, hi]; never counted."""
    lo, hi = r["measured_range_us"]
    each, errs = {}, []
    for fx in fixture_list(r["fixture"]):
        stats, err, _ = runs[fx]
        if err is None:
            try:
                each[fx] = metric_value(stats, o["metric"])
            except (ValidateError, KeyError, TypeError) as e:
                err = f"{e}"
        if err is not None:
            errs.append(err)
            failed.append({"id": r["id"], "fixture": fx, "error": err})
    if errs:
        o["status"] = "error: " + "; ".join(errs)
        return
    o["status"] = "ok"
    o["predicted_each"] = each
    o["predicted_min"], o["predicted_max"] = min(each.values()), max(each.values())
    if len(each) == 1:
        o["predicted"] = o["predicted_min"]
    o["in_range"] = sum(1 for v in each.values() if lo <= v <= hi)
    o["range_reproduced"] = o["in_range"] == len(each)


def _rel(p):
    p = Path(p).resolve()
    try:
        return str(p.relative_to(ROOT))
    except ValueError:
        return str(p)


# ----------------------------------------------------------------------------------------------
# Output


def _f(v, nd=2):
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def _us(v):
    if v is None:
        return "-"
    return f"{v:.4g}" if v < 100 else f"{v:.1f}"


def report(res, out=sys.stdout):
    w = out.write
    rows = res["rows"]
    w(f"vspyre validate: {res['table']} with {res['config']} ({res['vspyre_version'] or res['vspyre']})\n\n")
    hdr = f"{'id':34s} {'sec':>3s} {'type':4s} {'measured us':>12s} {'vspyre us':>12s} {'error %':>9s}  note\n"
    w("Measured kernels (M: counted) and predictions of other models (P: listed only)\n")
    w(hdr)
    for o in rows:
        if o["type"] == "M-ratio":
            continue
        if o["type"] == "P":
            meas = _us(o.get("other_model_us")) + "P"
        elif o.get("measured") is None and o.get("measured_range_us"):
            lo, hi = o["measured_range_us"]
            meas = f"{lo:g}-{hi:g}"
        else:
            meas = _us(o.get("measured"))
        err = o.get("error_percent", o.get("error_percent_vs_other_model"))
        note = "" if o.get("status") == "ok" else o.get("status", "")
        pred = _us(o.get("predicted"))
        if "in_range" in o:
            n = len(o["predicted_each"])
            if n > 1:
                pred = f"{o['predicted_min']:.3g}-{o['predicted_max']:.3g}"
            note = (f"range: {o['in_range']}/{n} fixture(s) in range, "
                    + ("reproduced" if o["range_reproduced"] else "NOT reproduced") + "; not counted")
        if o["type"] == "P" and o.get("status") == "ok":
            note = "vs the other model's prediction; not counted"
        if o.get("metric", "kernel") != "kernel":
            note = (o["metric"] + "; " + note).rstrip("; ")
        w(f"{o['id']:34s} {o['section']:>3s} {o['type']:4s} {meas:>12s} {pred:>12s} "
          f"{_f(err, 1) if err is None else f'{err:+.1f}':>9s}  {note}\n")
        if len(o.get("predicted_each") or {}) > 1:
            lo, hi = o["measured_range_us"]
            for fx, v in o["predicted_each"].items():
                w(f"  {Path(fx).name:55s} {v:12.4g}  {'in range' if lo <= v <= hi else 'OUT of range'}\n")
    w("\nRatios (M-ratio: checked as ratios and directions, not counted in MAPE)\n")
    w(f"{'id':50s} {'sec':>3s} {'measured':>9s} {'vspyre':>9s} {'error %':>9s}  direction (measured / vspyre)\n")
    for o in rows:
        if o["type"] != "M-ratio":
            continue
        if o.get("status") != "ok":
            w(f"{o['id']:50s} {o['section']:>3s} {_f(o.get('measured'), 3):>9s} {'-':>9s} {'-':>9s}  "
              f"{o.get('status')}\n")
            continue
        mark = "reproduced" if o["direction_reproduced"] else "NOT reproduced"
        w(f"{o['id']:50s} {o['section']:>3s} {o['measured']:9.3f} {o['predicted']:9.3f} "
          f"{o['error_percent']:+9.1f}  {o['direction_measured']} / {o['direction_predicted']}: {mark}\n")
    w("\nSummary over the counted M rows\n")
    if res["n_counted"]:
        rest = res["n_rows"] - res["n_counted"] - res["n_predictions"] - res["ratio"]["n"] - res["n_not_run"]
        w(f"  rows counted           {res['n_counted']} (of {res['n_rows']}: {res['n_predictions']} P, "
          f"{res['ratio']['n']} ratios run, {res['n_not_run']} without a fixture"
          + (f", {rest} range or not run" if rest else "") + ")\n")
        w(f"  MAPE                   {res['mape_percent']:.1f} %\n")
        w(f"  worst error            {res['max_error_percent']:.1f} % ({res['max_error_row']})\n")
        w(f"  Pearson (linear / log) {_f(res['pearson'], 3)} / {_f(res['pearson_log'], 3)}\n")
        w(f"  Spearman               {_f(res['spearman'], 3)}\n")
        side = {"+": "over-predicts", "-": "under-predicts", "0": "unbiased"}[res["bias_sign"]]
        w(f"  bias                   {res['bias_sign']} ({side}: geometric mean predicted/measured "
          f"{res['bias_geomean_ratio']:.3f}; mean signed error {res['mean_signed_error_percent']:+.1f} %)\n")
        for s, v in res["sections"].items():
            w(f"  section {s:4s}           n={v['n']:2d}  MAPE {v['mape_percent']:8.1f} %  "
              f"geomean ratio {v['bias_geomean_ratio']:.3f}\n")
        if res.get("mape_section_mean_percent") is not None:
            w(f"  mean of the sections'  MAPE {res['mape_section_mean_percent']:.1f} % (each section weighs the same)\n")
        wl = res.get("workloads") or {}
        if wl:
            top = list(wl.items())[:12]
            w(f"  by workload, largest share of the MAPE first ({len(top)} of {len(wl)}; all in validation.json):\n")
            for name, v in top:
                label = name if len(name) <= 56 else name[:53] + "..."
                w(f"    {label or '(no workload)':56s} n={v['n']:3d}  {v['mape_points']:5.2f} points  "
                  f"MAPE {v['mape_percent']:5.1f} %  mean {v['mean_signed_error_percent']:+6.1f} %  "
                  f"> 25 %: {v['rows_over_25_percent']}\n")
        for name, v in (res.get("other_models") or {}).items():
            w(f"  {name}: on the {v['n']} rows that carry its prediction, MAPE {v['mape_percent']:.1f} % "
              f"({v['rows_over_25_percent']} rows worse than 25 %); vspyre on the same rows "
              f"{v['vspyre_mape_percent']:.1f} % ({v['vspyre_rows_over_25_percent']})\n")
    else:
        w("  no counted rows ran\n")
    rt = res["ratio"]
    if rt["n"]:
        w(f"  ratios                 {rt['directions_reproduced']}/{rt['directions_total']} directions "
          f"reproduced (same = within +-{res['same_band_percent']:g} %); ratio MAPE "
          f"{rt['mape_percent']:.1f} %\n")
        if rt["not_reproduced"]:
            w(f"  not reproduced         {', '.join(rt['not_reproduced'])}\n")
    ls = res.get("launch_seeds")
    if ls:
        w(f"  launch seeds           MAPE " + " / ".join(
            f"{m:.2f} % ({'the config' if sd == 'config' else 'seed ' + str(sd)})"
            for sd, m in zip(ls["seeds"], ls["mape_percent"]) if m is not None) + "\n")
        w(f"                         {ls['rows_spread_over_5_percent']} of {ls['rows_compared']} rows move by more "
          f"than 5 % between them ({ls['rows_spread_over_10_percent']} by more than 10 %; median "
          f"{(ls['median_spread_percent'] or 0):.2f} %)\n")
        if ls["widest"]:
            w("                         widest: " + ", ".join(
                f"{x['id']} {x['spread_percent']:.1f} %" for x in ls["widest"][:3]) + "\n")
    rg = res.get("range") or {}
    if rg.get("n"):
        w(f"  ranges                 {rg['reproduced']}/{rg['n']} reproduced (every fixture's prediction "
          f"inside the measured range; not counted in MAPE)\n")
        if rg["not_reproduced"]:
            w(f"  range not reproduced   {', '.join(rg['not_reproduced'])}\n")
    if res["failed"]:
        w(f"\n{len(res['failed'])} fixture run(s) FAILED:\n")
        for f in res["failed"]:
            w(f"  {f['id']}: {f['fixture']}: {f['error']}\n")


def write_csv(res, path):
    with open(path, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        wr.writeheader()
        for o in res["rows"]:
            d = dict(o)
            if o.get("measured") is None and o.get("measured_range_us"):
                d["measured"] = "{}-{}".format(*o["measured_range_us"])
            if isinstance(o.get("fixture"), list):
                d["fixture"] = " ".join(o["fixture"])
            if o.get("predicted_each") and len(o["predicted_each"]) > 1:
                d["predicted"] = "{:.6g}-{:.6g}".format(o["predicted_min"], o["predicted_max"])
            if o.get("error_percent") is None and o.get("error_percent_vs_other_model") is not None:
                d["error_percent"] = o["error_percent_vs_other_model"]
            wr.writerow({k: ("" if d.get(k) is None else d.get(k)) for k in CSV_COLUMNS})


def write_plot(res, path):
    """Predicted vs measured, log-log, identity and x2 lines; M rows by section, P rows hollow."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no plot"
    pts = [o for o in res["rows"] if o.get("unit") == "us" and o.get("predicted")
           and (o.get("measured") or o.get("other_model_us"))]
    if not pts:
        return "nothing to plot"
    fig, ax = plt.subplots(figsize=(7.5, 6.5))
    secs = list(dict.fromkeys(o["section"] for o in pts))
    cmap = plt.get_cmap("tab10")
    allv = []
    for i, s in enumerate(secs):
        for typ, face in (("M", None), ("P", "none")):
            sel = [o for o in pts if o["section"] == s and o["type"] == typ]
            if not sel:
                continue
            x = [o["measured"] if typ == "M" else o["other_model_us"] for o in sel]
            y = [o["predicted"] for o in sel]
            allv += x + y
            c = cmap(i % 10)
            ax.scatter(x, y, s=36, marker="o" if typ == "M" else "s",
                       facecolors=c if face is None else "none", edgecolors=c,
                       label=f"§{s}" + (" (P: other model, not counted)" if typ == "P" else ""))
    lo, hi = min(allv) / 2, max(allv) * 2
    ax.plot([lo, hi], [lo, hi], "k-", lw=1, label="identity")
    for k in (2, 0.5):
        ax.plot([lo, hi], [lo * k, hi * k], "k:", lw=0.7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured kernel time (µs)")
    ax.set_ylabel("vspyre predicted (µs)")
    t = "vspyre vs Spyre measurements"
    if res["mape_percent"] is not None:
        t += f": MAPE {res['mape_percent']:.1f} %, Spearman {_f(res['spearman'], 3)}"
    ax.set_title(t, fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def prepare_out(out_dir):
    """--out, made before any fixture runs (it failed after all of them had)."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ValidateError(f"--out: {out_dir} exists and is not a directory")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValidateError(f"--out: cannot create {out_dir}: {e.strerror or e}") from e
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise ValidateError(f"--out: cannot write in {out_dir}")


def write_outputs(res, out_dir, plot=True):
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_csv(res, out_dir / "validation.csv")
    (out_dir / "validation.json").write_text(json.dumps(res, indent=1) + "\n")
    note = write_plot(res, out_dir / "validation.png") if plot else "--no-plot"
    return note


# ----------------------------------------------------------------------------------------------
# Launch seeds: how far the table hangs on the cores' order


def seed_overlay(config, seed, tmp):
    """A config that includes `config` and sets card.launch_seed."""
    path = Path(tmp) / f"launch_seed_{seed}.yaml"
    path.write_text(f"include: [{json.dumps(str(Path(config).resolve()))}]\n"
                    f"card:\n  launch_seed: {seed}\n")
    return path


def add_seed_spread(res, others):
    """Adds res["launch_seeds"] (and a per-row "seed_range_us") from the runs of the same table
    with other card.launch_seed values: {seed: result}. Only counted rows are compared."""
    per = {o["id"]: [o["predicted"]] for o in res["rows"] if o["counted"]}
    for seed, r in others.items():
        for o in r["rows"]:
            if o["id"] in per and o["counted"]:
                per[o["id"]].append(o["predicted"])
    spread = {}
    for o in res["rows"]:
        v = per.get(o["id"])
        if v and len(v) == len(others) + 1 and min(v) > 0:
            o["seed_range_us"] = [min(v), max(v)]
            spread[o["id"]] = (max(v) / min(v) - 1.0) * 100.0
    widest = sorted(spread.items(), key=lambda kv: -kv[1])
    res["launch_seeds"] = {
        "seeds": ["config"] + [int(s) for s in others],
        "mape_percent": [res["mape_percent"]] + [r["mape_percent"] for r in others.values()],
        "rows_over_25_percent": [rows_over_25(o for o in r["rows"] if o["counted"])
                                 for r in [res, *others.values()]],
        "rows_compared": len(spread),
        "rows_spread_over_5_percent": sum(1 for v in spread.values() if v > 5.0),
        "rows_spread_over_10_percent": sum(1 for v in spread.values() if v > 10.0),
        "median_spread_percent": (statistics.median(spread.values()) if spread else None),
        "widest": [{"id": k, "spread_percent": v} for k, v in widest[:10]],
    }


# ----------------------------------------------------------------------------------------------
# Baseline


def baseline_of(res):
    return {
        "written_by": "python3 scripts/vspyre_validate.py --write-baseline",
        "table": res["table"], "config": res["config"], "vspyre_version": res["vspyre_version"],
        "mape_percent": res["mape_percent"], "max_error_percent": res["max_error_percent"],
        "max_error_row": res["max_error_row"], "spearman": res["spearman"],
        "pearson_log": res["pearson_log"], "bias_geomean_ratio": res["bias_geomean_ratio"],
        "n_counted": res["n_counted"],
        "ratio_directions_reproduced": res["ratio"]["directions_reproduced"],
        "ratio_directions_total": res["ratio"]["directions_total"],
        "rows": {o["id"]: {"predicted_us": o["predicted"], "error_percent": o["error_percent"]}
                 for o in res["rows"] if o["counted"]},
    }


def read_baseline(baseline_path):
    """The baseline's JSON, checked (main reads it before any fixture runs)."""
    p = Path(baseline_path)
    try:
        base = json.loads(p.read_text())
    except OSError as e:
        raise ValidateError(f"{p}: cannot read the baseline: {e.strerror}") from e
    except ValueError as e:  # UnicodeDecodeError too
        raise ValidateError(f"{p}: not a JSON file: {e}") from e
    if not isinstance(base, dict) or not _num(base.get("mape_percent")):
        raise ValidateError(f"{p}: no numeric `mape_percent` (write one with --write-baseline)")
    if "rows" in base and not isinstance(base["rows"], dict):
        raise ValidateError(f"{p}: `rows` must map each row id to its prediction (write one with --write-baseline)")
    if base.get("rows") and not any(isinstance(v, dict) and _num(v.get("error_percent")) for v in base["rows"].values()):
        raise ValidateError(f"{p}: no row of `rows` has a numeric `error_percent` (write one with --write-baseline)")
    return base


def check_baseline(res, baseline_path, tolerance=1.0):
    """(ok, message): fails when MAPE > baseline MAPE + tolerance points or a fixture failed."""
    p = Path(baseline_path)
    base = read_baseline(p)
    msgs, ok = [], True
    if res["failed"]:
        ok = False
        msgs.append(f"{len(res['failed'])} fixture run(s) failed: "
                    + ", ".join(f["id"] for f in res["failed"]))
    cur, ref = res["mape_percent"], base["mape_percent"]
    counted = {o["id"]: o for o in res["rows"] if o["counted"]}
    brows = {k: v for k, v in (base.get("rows") or {}).items()
             if isinstance(v, dict) and _num(v.get("error_percent"))}
    scope, notes = "", []
    if not brows and res.get("select"):
        # A --rows subset against a baseline without rows: its MAPE is the whole table's.
        ok = False
        msgs.append(f"{p} lists no rows, so a --rows subset cannot be compared with it")
        return ok, "\n".join(msgs)
    if brows and set(brows) != set(counted):
        # Different row sets (a --rows subset, rows added or removed): compare on the common rows.
        common = sorted(set(brows) & set(counted))
        new, gone = sorted(set(counted) - set(brows)), sorted(set(brows) - set(counted))
        if not common:
            ok = False
            msgs.append("no counted row is in the baseline: refresh it with --write-baseline")
            return ok, "\n".join(msgs)
        cur = sum(abs(counted[i]["error_percent"]) for i in common) / len(common)
        ref = sum(abs(brows[i]["error_percent"]) for i in common) / len(common)
        scope = f" over the {len(common)} rows both have"
        if new:
            notes.append(f"note: {len(new)} counted row(s) not in the baseline: {', '.join(new[:8])}"
                         + (" ..." if len(new) > 8 else ""))
        if gone:
            notes.append(f"note: {len(gone)} baseline row(s) not counted now: {', '.join(gone[:8])}"
                         + (" ..." if len(gone) > 8 else ""))
    if cur is None:
        ok = False
        msgs.append("no counted row ran, so there is no MAPE")
    else:
        d = cur - ref
        if d > tolerance:
            ok = False
            worse = sorted(((abs(counted[i]["error_percent"]) - abs(b["error_percent"]), i,
                             b["error_percent"], counted[i]["error_percent"])
                            for i, b in brows.items() if i in counted), reverse=True)
            msgs.append(f"MAPE rose {d:+.2f} points{scope}: {cur:.2f} % against the baseline "
                        f"{ref:.2f} % ({p}; tolerance {tolerance:g} points)")
            for dw, rid, was, now in worse[:5]:
                if dw > 0:
                    msgs.append(f"  {rid}: error {was:+.1f} % -> {now:+.1f} %")
        else:
            msgs.append(f"MAPE {cur:.2f} % against the baseline {ref:.2f} %{scope} "
                        f"({d:+.2f} points, tolerance {tolerance:g})")
    moved = rows_moved(counted, base.get("rows") or {})
    if moved:
        big = [m for m in moved if abs(m[0]) > MOVED_PERCENT]
        notes.append(f"note: {len(big)} of the {len(moved)} rows the baseline also predicted moved by "
                     f"more than {MOVED_PERCENT:g} % since it" + (", most:" if big else ""))
        for dp, rid, was, now in big[:5]:
            notes.append(f"  {rid}: {was:.4g} -> {now:.4g} us ({dp:+.1f} %)")
    msgs += notes
    return ok, "\n".join(msgs)


# A row whose prediction moved by more than this since the baseline is named in the check's notes,
# so that a change which moves many rows without moving MAPE is seen.
MOVED_PERCENT = 5.0


def rows_moved(counted, base_rows):
    """[(percent change, id, baseline us, current us)] for the counted rows the baseline also
    predicted, the largest change first."""
    out = []
    for rid, o in counted.items():
        b = base_rows.get(rid)
        was = b.get("predicted_us") if isinstance(b, dict) else None
        now = o.get("predicted")
        if _num(was) and _num(now) and was > 0 and o.get("unit", "us") == "us":
            out.append(((now / was - 1.0) * 100.0, rid, was, now))
    out.sort(key=lambda m: (-abs(m[0]), m[1]))
    return out


# ----------------------------------------------------------------------------------------------
# CLI


def _same_file(a, b):
    """Whether two paths name one file: by identity when both exist (a hard link or a symlink is
    the same file), else by their resolved paths (an output not written yet)."""
    a, b = str(a), str(b)
    if os.path.exists(a) and os.path.exists(b):
        return os.path.samefile(a, b)
    return os.path.realpath(a) == os.path.realpath(b)


def check_no_overwrite(a):
    """Refuse, before anything runs or is written, an output that is one of the inputs or another
    output: --write-baseline onto the table, the config or the --check-baseline file, and
    --out's validation.csv/.json/.png onto any of them."""
    inputs = [("the measurement table (--table)", a.table), ("the card config (--config)", a.config)]
    if a.check_baseline:
        inputs.append(("the baseline checked against (--check-baseline)", a.check_baseline))
    outs = [("--out", Path(a.out) / n) for n in ("validation.csv", "validation.json")
            + (() if a.no_plot else ("validation.png",))]
    if a.write_baseline:
        outs.append(("--write-baseline", Path(a.write_baseline)))
    for i, (opt, o) in enumerate(outs):
        if os.path.isdir(o):
            raise ValidateError(f"{opt}: {o} is a directory, expected a file to write")
        for what, f in inputs:
            if _same_file(o, f):
                raise ValidateError(f"{opt}: {o} is {what}, which it would overwrite: write it elsewhere")
        for opt2, o2 in outs[i + 1:]:
            if _same_file(o, o2):
                raise ValidateError(f"{opt2}: {o2} is the same file as {o}, which {opt} writes too: "
                                    f"write it elsewhere")


def seed_list(text):
    """--seeds: comma-separated card.launch_seed values (integers in [0, 2^63))."""
    try:
        seeds = [int(x) for x in text.split(",") if x.strip() != ""]
    except ValueError:
        seeds = []
    if not seeds or any(x < 0 or x >= 2 ** 63 for x in seeds):
        raise argparse.ArgumentTypeError(f"'{text}': expected integers in [0, 2^63) separated by commas, e.g. 2,3")
    return seeds


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="vspyre validate",
        description="Compare vspyre's kernel times with public Spyre hardware measurements.")
    ap.add_argument("--table", default=str(DEFAULT_TABLE),
                    help="the measurement table (default bench/validation/measured.yaml)")
    ap.add_argument("--config", default=str(DEFAULT_CONFIG),
                    help="card config (default configs/spyre.yaml)")
    ap.add_argument("--json", action="store_true", help="print one JSON object, not the report")
    ap.add_argument("--out", "-o", default="out/validation",
                    help="directory for validation.csv/.png/.json (default out/validation)")
    ap.add_argument("--vspyre", metavar="PATH",
                    help="the vspyre binary each fixture runs. `vspyre validate` passes the binary it was "
                         "run as, so $VSPYRE_BIN is not read there (a --vspyre of your own still "
                         "wins); run as python3 scripts/vspyre_validate.py without --vspyre: $VSPYRE_BIN, "
                         "else build/release/cli/vspyre, else vspyre on PATH, else the newest build/*/cli/vspyre")
    ap.add_argument("--jobs", "-j", type=int, help="fixtures run at once (default: all cores)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per fixture (default 1800)")
    ap.add_argument("--same-band", type=float, default=5.0,
                    help="a ratio within +-this percent of 1 counts as 'same' (default 5)")
    ap.add_argument("--rows", metavar="REGEX",
                    help="only rows whose id matches (search) or whose section equals REGEX")
    ap.add_argument("--write-baseline", nargs="?", const=str(DEFAULT_BASELINE), metavar="FILE",
                    help="write the summary as the baseline (default bench/validation/baseline.json)")
    ap.add_argument("--check-baseline", metavar="FILE",
                    help="exit 1 when MAPE rises more than --tolerance points above FILE's")
    ap.add_argument("--tolerance", type=float, default=1.0,
                    help="allowed MAPE rise in percentage points (default 1)")
    ap.add_argument("--seeds", metavar="N[,N...]", type=seed_list,
                    help="also run the table with these card.launch_seed values and report how far "
                         "MAPE and each row move with the cores' start order (the baseline and the "
                         "table stay the config's)")
    ap.add_argument("--no-plot", action="store_true", help="skip the PNG")
    ap.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    a = ap.parse_args(argv)
    if a.jobs is not None and a.jobs < 1:
        ap.error("--jobs must be at least 1")
    if not (0 <= a.same_band < 100):
        ap.error("--same-band must be a percentage in [0, 100)")
    if not 0 < a.timeout <= 1e6:
        ap.error("--timeout must be a number of seconds in (0, 1e6]")
    if not 0 <= a.tolerance < float("inf"):
        ap.error("--tolerance must be a number of percentage points, 0 or more")
    prog = None if (a.quiet or a.json) else (
        lambda s: sys.stderr.write(f"vspyre validate: {s}\n"))
    try:
        check_no_overwrite(a)
        if a.check_baseline and not Path(a.check_baseline).is_file():
            raise ValidateError(f"{a.check_baseline}: no such baseline file")
        if a.check_baseline:
            read_baseline(a.check_baseline)
        res = validate(a.table, config=a.config, vspyre=a.vspyre, jobs=a.jobs, timeout=a.timeout,
                       band=a.same_band / 100.0, select=a.rows, progress=prog,
                       before_run=lambda: prepare_out(a.out))
        if a.seeds:
            others = {}
            with tempfile.TemporaryDirectory() as tmp:
                for seed in a.seeds:
                    if prog:
                        prog(f"card.launch_seed={seed}")
                    others[seed] = validate(a.table, config=seed_overlay(a.config, seed, tmp), vspyre=a.vspyre,
                                            jobs=a.jobs, timeout=a.timeout, band=a.same_band / 100.0,
                                            select=a.rows, progress=prog)
                    if others[seed]["failed"]:
                        raise ValidateError(f"card.launch_seed={seed}: {len(others[seed]['failed'])} fixture(s) failed")
            add_seed_spread(res, others)
        note = write_outputs(res, a.out, plot=not a.no_plot)
        res["out"] = str(a.out)
        if a.json:
            sys.stdout.write(json.dumps(res, indent=1) + "\n")
        else:
            report(res)
            print(f"\nwrote {a.out}/validation.csv, validation.json"
                  + ("" if note else ", validation.png") + (f" ({note})" if note else ""))
        rc = 0
        if a.write_baseline:
            if res["failed"] or res["mape_percent"] is None:
                raise ValidateError("not writing a baseline: some fixtures failed or none counted")
            if a.rows:
                raise ValidateError("not writing a baseline from a --rows subset")
            Path(a.write_baseline).write_text(json.dumps(baseline_of(res), indent=1) + "\n")
            sys.stderr.write(f"vspyre validate: wrote the baseline {a.write_baseline} "
                             f"(MAPE {res['mape_percent']:.2f} %)\n")
        if a.check_baseline:
            ok, msg = check_baseline(res, a.check_baseline, a.tolerance)
            sys.stderr.write(("vspyre validate: baseline check passed: " if ok else
                              "vspyre validate: baseline check FAILED: ") + msg + "\n")
            rc = 0 if ok else 1
        elif res["failed"]:
            rc = 1
        return rc
    except ValidateError as e:
        sys.stderr.write(f"vspyre validate: error: {e}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("vspyre validate: interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
