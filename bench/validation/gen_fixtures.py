#!/usr/bin/env python3
"""Generate the bundle fixtures that bench/validation/measured.yaml needs beyond the presets.

    python3 bench/validation/gen_fixtures.py            # (re)write them under tests/fixtures/bundles
                                                        # and tests/fixtures/sweep
    python3 bench/validation/gen_fixtures.py --list     # names, kinds and parameters
    python3 bench/validation/gen_fixtures.py --import-captures DIR   # the compiler's bundles for
                                                        # the database's records, from DIR/<name>/
    python3 bench/validation/gen_fixtures.py --table    # the database's rows of measured.yaml

Each fixture is made by scripts/gen_bundle.py from a workload kind and -p overrides (the command is
recorded in its README.md); this script then replaces the README's generic "Mirrors:" line with
the measured.md row the fixture stands for.  The output is deterministic.
"""
import argparse
import csv
import functools
import importlib.util
import json
import os
import re
import shutil
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
OUTROOT = "tests/fixtures/bundles"

S6A = "measured.md section 6a (hbm_ops log, HieronZhang/torch-spyre haoyang_logs/hbm_ops_20260702_045208.log)"
S2 = "measured.md section 2 (PR #4302 require_layout)"
S6D = "measured.md section 6d (mm_family log, HieronZhang/torch-spyre haoyang_logs/mm_family_20260724_082545.log)"
LAYOUT_TXT = {"default": "column Baseline (activation/output ['x','in','mb'] / ['x','out','mb'])",
              "batch_outer": "column Batch-outer in+out (['mb','in','x'] / ['mb','out','x'])"}

S7 = ("torch-spyre cost-model measurement database (HieronZhang/torch-spyre "
      "tools/cost_model/sweep_records.csv, log cost_model_sweep_20260807_020123.log, model b8805a0)")
# §7 (sweep_records): add at two shapes on 1-32 cores: shape -> {cores: (log line, measured us)}
SWEEP_ADD = {(4096, 4096): {1: (1418, 1498.853), 2: (1612, 1018.37), 4: (1806, 1045.824), 8: (1903, 968.048),
                            16: (1515, 932.428), 32: (1709, 875.927)},
             (2048, 8192): {1: (2195, 1465.38), 2: (2390, 1044.975), 4: (2584, 1077.859), 8: (2681, 1055.094),
                            16: (2293, 1016.817), 32: (2487, 876.721)}}
# §7 (sweep_records, is_current=True): add at other shapes on 32 cores: shape -> (log line, us, BENCH_TILES, LX_PLANNING).
# 2048x1024 / 2048x4096 / 2048x16384 reuse the identical §6a fixtures add_2048x*_c32 (not rewritten here).
SWEEP_ADD32 = {(2048, 1024): (51, 107.862, 0, 0), (8192, 1024): (246, 458.219, 0, 0),
               (2048, 2048): (1028, 219.077, 0, 0), (8192, 2048): (1125, 913.765, 0, 0),
               (2048, 4096): (1223, 439.586, 0, 0), (512, 4096): (2001, 109.11, 0, 0),
               (8192, 4096): (2098, 1837.389, 0, 0), (2048, 16384): (441, 1758.992, 0, 0),
               (512, 16384): (735, 461.307, 0, 0), (64, 16384): (832, 52.996, 0, 1),
               (128, 16384): (344, 108.178, 0, 1), (256, 16384): (637, 284.282, 0, 1)}
SWEEP_ADD32_REUSED = {(2048, 1024), (2048, 4096), (2048, 16384)}
# §7 (is_current=True): amax over the last (stick) dim, keepdim, on 1-32 cores (BENCH_TILES=0, LX_PLANNING=1):
# shape -> {cores: (log line, us)}
SWEEP_AMAX = {(4096, 2048): {1: (13038, 971.189), 2: (13228, 521.177), 4: (13418, 268.275), 8: (13513, 217.706),
                             16: (13133, 222.863), 32: (13323, 132.726)},
              (8192, 2048): {1: (13703, 2374.246), 2: (13893, 1156.471), 4: (14083, 600.8), 8: (14178, 438.857),
                             16: (13798, 439.163), 32: (13988, 283.065)},
              (2048, 8192): {1: (14558, 1988.107), 2: (14748, 1043.5), 4: (14938, 550.327), 8: (15033, 461.491),
                             16: (14653, 439.416), 32: (14843, 222.367)}}
S7V2 = ("torch-spyre cost-model measurement database (HieronZhang/torch-spyre "
        "tools/cost_model/sweep_records.csv, log v2_neg.log, model 04452bd, is_current=False)")
# §7 (is_current=False, log v2_neg.log): neg 8192x2048 on 1-32 cores (BENCH_TILES=1, LX_PLANNING=1)
SWEEP_NEG = {(8192, 2048): {1: (1682, 990.256), 2: (1874, 771.21), 4: (2066, 741.153), 8: (2162, 742.515),
                            16: (1778, 740.712), 32: (1970, 652.384)}}
S7MM = ("torch-spyre cost-model measurement database (HieronZhang/torch-spyre "
        "tools/cost_model/sweep_records.csv, log lxsession_mmwd.log, model 38554b4, is_current=False)")
# §7 (is_current=False, lxsession_mmwd.log): 2-D mm M=4096, K=2048, N=1024 (N from io_hbm_bytes =
# 2(MK+KN+MN) = 29360128) on 1-32 cores: cores -> (log lines, us, -p split); two records at 8 and 32
# cores: the median (mean of the two) is used.
SWEEP_MM = {1: ("4852", 8012.092, "1"), 2: ("5052", 4142.32, "out=2"), 4: ("5352", 2016.489, "mb=2,out=2"),
            8: ("5452, :5552", 1079.822, "mb=2,out=4"), 16: ("4952", 593.065, "mb=4,out=4"),
            32: ("5152, :5252", 379.045, "mb=4,out=8")}
# §6a pointwise: op -> (opFunc, kind, {shape: measured us})
POINTWISE = {
    "neg": ("neg", "unary", {1024: 77.97, 4096: 321.98, 16384: 1311.87}),
    "gelu": ("gelufwd", "unary", {1024: 77.99, 4096: 321.41, 16384: 1319.81}),
    "exp": ("exp", "unary", {1024: 77.63, 4096: 318.37, 16384: 1314.44}),
    "add": ("add", "binary", {1024: 106.80, 4096: 434.73, 16384: 1752.74}),
    "mul": ("mul", "binary", {1024: 109.27, 4096: 434.82, 16384: 1752.81}),
}
# §2 matmul: (B, N) -> (baseline ms, batch-outer ms)
MATMUL2 = {(2, 12800): (4.604, 2.196), (4, 12800): (6.631, 4.244), (8, 12800): (26.968, 8.384),
           (2, 25600): (6.862, 4.879), (4, 25600): (12.156, 7.672), (8, 25600): (31.985, 15.502)}
# §6d: cores -> (split m x n as measured.md gives it, -p split, measured us)
MM6D = {2: ("1x2", "out=2", 1038.6), 4: ("2x2", "mb=2,out=2", 514.2), 8: ("2x4", "mb=2,out=4", 324.6),
        16: ("4x4", "mb=4,out=4", 218.5)}

S8CUBE = ("HieronZhang/torch-spyre bmm_observation/bmm_layout_effects.md (commit a3f2847b), section 6 "
          "'The same cube at one core'")
# §8 (bmm layout cube at one core): torch.bmm [B,1024,2048] @ [B,2048,1024] -> [B,1024,1024], one
# core, A/B/C each row-outer (the compiler default, batch just outside the stick) or batch-outer:
# B -> {A B C (r/b): us}
CUBE1 = {2: {"rrr": 5502, "rrb": 14659, "rbr": 4151, "rbb": 4140, "brr": 4159, "brb": 5670, "bbr": 4135,
             "bbb": 4135},
         4: {"rrr": 21322, "rrb": 30942, "rbr": 12828, "rbb": 12698, "brr": 12294, "brb": 11602, "bbr": 8261,
             "bbb": 8261}}
CUBE_LAYOUT = {"r": "default", "b": "batch_outer"}
CUBE_WEIGHT = {"r": "row", "b": "batch"}
S8PROJ = ("AdnanHoque/torch-spyre docs/pr-mlp-prefill-explained/artifacts/outputs/jamie_unit_bmm_probe.md "
          "(commit 6942fd9c)")
# §8 (one projection in four layouts): [1,512,4096] @ [4096,12800] on 32 cores:
# fixture suffix -> (batch, gen_bundle layout, the doc's layout text, measured us)
PROJ = {"2d_rowmajor": (0, "row_major", "2-D SDSC, INPUT [in, mb] / OUTPUT [out, mb] (torch-spyre's, 'baseline tsp')",
                        2469),
        "x1_default": (1, "default", "`x,in,mb` / `x,out,mb`", 3394),
        "x1_rowmajor": (1, "row_major", "`in,mb,x` / `out,mb,x`", 3972),
        "x1_batchouter": (1, "batch_outer", "`mb,in,x` / `mb,out,x`", 1021)}

# Section 9: the spyre-perf-suite kernel reports of the same document set (torch-spyre upstream main
# c7861a0 against the fix branch, 2026-06-07/08), one session per report.
S9AB = ("AdnanHoque/torch-spyre docs/pr-mlp-prefill-explained/artifacts/outputs/"
        "prefill_bs1_sl512_main_vs_pr_sendnn_20260608_072036/prefill_bs1_sl512_main_vs_pr_sendnn_summary.md "
        "(commit dc4702b6)")
S9SUITE = ("AdnanHoque/torch-spyre docs/pr-mlp-prefill-explained/artifacts/outputs/full_suite_attempts/"
           "pr_mlp_fix_full_suite_20260607_095404/kernel_report.txt (commit 6942fd9c)")
# [1,512,4096] @ [4096,N] on 32 cores, main (2-D row-major SDSC) and the fix (`mb,in,x`):
# N -> (main us, fix us); N = 12800 is section 8's proj_* (the same document set).
PROJ9 = {1024: (127, 90), 4096: (560, 318)}
# Decode [4,1,4096] @ [4096,N] on 32 cores, the fix branch's full suite: N -> us.
DECODE9 = {1024: 56, 4096: 214, 12800: 721}


def decode_split(n, batch=4, cores=32):
    """32 cores as out x x: the most output sticks a core can take whole, the rest over the batch."""
    sticks = n // 64
    for out in range(cores, 0, -1):
        if cores % out == 0 and sticks % out == 0 and batch % (cores // out) == 0:
            return f"out={out}" if out == cores else f"x={cores // out},out={out}"
    raise ValueError(f"no split of {cores} cores for N={n}")


ROWS_NOTE = "The database does not give the work division; the fixture splits rows."


def row_split(cores):
    """gen_bundle.py's split for rows divided among `cores` (one core: no split)."""
    return "1" if cores == 1 else f"mb={cores}"


def fixtures():
    """[(name, kind, params, mirror)] in a fixed order; presets of gen_bundle.py are not repeated."""
    out = []
    for op, (func, kind, times) in POINTWISE.items():
        for n, us in times.items():
            name = f"{op}_2048x{n}_c32"
            if name in ("neg_2048x1024_c32", "add_2048x1024_c32"):
                continue  # gen_bundle.py presets
            out.append((name, kind, {"op": func, "shape": [2048, n], "split": "mb=32"},
                        f"{S6A}, row `{op}`, column [2048,{n}], 32 cores, row split d0:32: {us} us."))
    for (b, n), (base_ms, outer_ms) in MATMUL2.items():
        split = "mb=4,out=8"  # the compiler's split of these shapes (tests/fixtures/captured)
        for layout, ms in (("default", base_ms), ("batch_outer", outer_ms)):
            name = f"matmul_b{b}_n{n}_{layout}"
            if (b, n) == (8, 12800):
                continue  # presets matmul_b8_default / matmul_b8_batch_outer
            out.append((name, "matmul", {"batch": b, "m": 512, "k": 4096, "n": n, "layout": layout,
                                         "split": split},
                        f"{S2}, row `[{b},512,4096] @ [4096,{n}]`, {LAYOUT_TXT[layout]}: {ms} ms. "
                        f"32 cores; measured.md does not give the work division. The fixture uses "
                        f"{{{split.replace('=', ':')}}}, the split torch-spyre's compiler chose for "
                        f"this shape in the default layout (tests/fixtures/captured/"
                        f"matmul_b{b}_n{n}_default; in that layout this fixture and the captured "
                        f"bundle give the same time and bytes)."))
    for cores, (mxn, split, us) in MM6D.items():
        out.append((f"mm_2048x512x2048_c{cores}", "matmul",
                    {"batch": 0, "m": 2048, "k": 512, "n": 2048, "split": split},
                    f"{S6D}, row 2048x512x2048, {cores} cores (split m x n = {mxn}): {us} us."))
    for (rows, cols), by_cores in SWEEP_ADD.items():
        for cores, (line, us) in by_cores.items():
            out.append((f"add_{rows}x{cols}_c{cores}", "binary",
                        {"op": "add", "shape": [rows, cols], "split": row_split(cores)},
                        f"{S7}, record :{line}, add {rows}x{cols}, {cores} core(s), BENCH_TILES=1, "
                        f"LX_PLANNING=1: {us} us (median of 7). {ROWS_NOTE}"))
    for (rows, cols), (line, us, tiles, lx) in SWEEP_ADD32.items():
        if (rows, cols) in SWEEP_ADD32_REUSED:
            continue  # the identical §6a fixture add_{rows}x{cols}_c32
        out.append((f"add_{rows}x{cols}_c32", "binary",
                    {"op": "add", "shape": [rows, cols], "split": "mb=32"},
                    f"{S7}, record :{line}, add {rows}x{cols}, 32 cores, BENCH_TILES={tiles}, "
                    f"LX_PLANNING={lx}: {us} us (median of 7). {ROWS_NOTE}"))
    for (rows, cols), by_cores in SWEEP_AMAX.items():
        for cores, (line, us) in by_cores.items():
            out.append((f"amax_{rows}x{cols}_c{cores}", "reduce",
                        {"op": "max", "dim": 1, "shape": [rows, cols],
                         "split": row_split(cores)},
                        f"{S7}, record :{line}, amax over the last dim of {rows}x{cols} (keepdim; "
                        f"io_hbm_bytes = input + 128 B per row), {cores} core(s), BENCH_TILES=0, "
                        f"LX_PLANNING=1: {us} us (median of 7). {ROWS_NOTE}"))
    for (rows, cols), by_cores in SWEEP_NEG.items():
        for cores, (line, us) in by_cores.items():
            out.append((f"neg_{rows}x{cols}_c{cores}", "unary",
                        {"op": "neg", "shape": [rows, cols], "split": row_split(cores)},
                        f"{S7V2}, record :{line}, neg {rows}x{cols}, {cores} core(s), BENCH_TILES=1, "
                        f"LX_PLANNING=1: {us} us (median of 7). {ROWS_NOTE}"))
    for cores, (lines, us, split) in SWEEP_MM.items():
        out.append((f"mm_4096x2048x1024_c{cores}", "matmul",
                    {"batch": 0, "m": 4096, "k": 2048, "n": 1024, "split": split},
                    f"{S7MM}, record(s) :{lines}, mm M=4096 K=2048 N=1024 (N from io_hbm_bytes), "
                    f"{cores} core(s): {us} us (median of 7{'; mean of the two records' if ',' in lines else ''}). "
                    f"The database does not give the work division; the fixture splits m x n as the "
                    f"§6d fixtures do ({split})."))
    out.append(("mm_2048x1024x2048_c1", "matmul",
                {"batch": 0, "m": 2048, "k": 1024, "n": 2048, "split": "1"},
                f"{S6D}, row 2048x1024x2048, 1 core: 4129.6 us."))
    for b, cells in CUBE1.items():
        for abc, us in cells.items():
            a, w, c = abc
            out.append((f"bmm_b{b}_1024x2048x1024_{abc}_c1", "matmul",
                        {"batch": b, "m": 1024, "k": 2048, "n": 1024, "layout": CUBE_LAYOUT[a],
                         "weight_batched": True, "weight_layout": CUBE_WEIGHT[w],
                         "out_layout": CUBE_LAYOUT[c], "split": "1"},
                        f"{S8CUBE}, row A={CUBE_WEIGHT[a]} B={CUBE_WEIGHT[w]} C={CUBE_WEIGHT[c]}, "
                        f"B={b}: {us} us (median of 7, one core; "
                        f"row = row-outer [M][K/64][B][64], batch = batch-outer [B][K/64][M][64])."))
    for suffix, (batch, layout, text, us) in PROJ.items():
        out.append((f"proj_512x4096x12800_{suffix}_c32", "matmul",
                    {"batch": batch, "m": 512, "k": 4096, "n": 12800, "layout": layout, "split": "mb=4,out=8"},
                    f"{S8PROJ}, layout {text}: {us / 1000:.3f} ms, 32 cores. The doc gives the work "
                    f"division {{x:1, mb:4, out:8, in:1}} for the `mb,in,x` case; the fixture uses it "
                    f"for all four (torch-spyre's split of the same shape in section 2)."))
    for n, (main_us, fix_us) in PROJ9.items():
        for suffix, batch, layout, text, us in (
                ("2d_rowmajor", 0, "row_major", "main (c7861a0): 2-D SDSC, INPUT [in, mb] / OUTPUT [out, mb]", main_us),
                ("x1_batchouter", 1, "batch_outer", "the fix (e544a05): `mb,in,x` / `mb,out,x`", fix_us)):
            out.append((f"proj_512x4096x{n}_{suffix}_c32", "matmul",
                        {"batch": batch, "m": 512, "k": 4096, "n": n, "layout": layout, "split": "mb=4,out=8"},
                        f"{S9AB}, [1,512,4096] @ [4096,{n}], torch-spyre {text}: {us / 1000:.3f} ms, 32 cores. "
                        f"The report gives no work division; the fixture uses section 8's mb:4 x out:8."))
    for n, us in DECODE9.items():
        split = decode_split(n)
        out.append((f"decode_4x1x4096x{n}_c32", "matmul",
                    {"batch": 4, "m": 1, "k": 4096, "n": n, "layout": "batch_outer", "split": split},
                    f"{S9SUITE}, matmul [[4, 1, 4096], [4096, {n}]] (decode), torch-spyre 824ad4b "
                    f"(branch pr-mlp-fix): {us / 1000:.3f} ms, 32 cores. The report gives neither layout nor "
                    f"work division; the fixture takes the fix's `mb,in,x` and splits {split.replace('=', ':')} "
                    f"(each core's output sticks whole, the rest of the 32 cores over the batch)."))
    return out


# ----------------------------------------------------------------------------------------------
# Sections 7 and 7o, the cost model's database taken whole: every record of its current log
# cost_model_sweep_20260807_020123.log (the is_current=True rows, `sweep_current.csv`) and of ten
# of its older logs (`sweep_older.csv`), both column extracts of sweep_records.csv, becomes a row
# of the table. Records the hand-written part of measured.yaml already cites (by log and record)
# are left there; the rest are written between the BEGIN/END markers by --table.

SWEEP_CSV = Path(__file__).resolve().parent / "sweep_current.csv"
# The database's older logs (other builds, is_current=False), the kinds the compiler's bundles
# were captured for: every record of their logs.
SWEEP_OLDER_CSV = Path(__file__).resolve().parent / "sweep_older.csv"
CURRENT_LOG = "cost_model_sweep_20260807_020123.log"
# The current log's fixtures beyond those above: timing fixtures of validation section 7, in a
# root of their own (the exec tests check the data of each kind on a few of them, not all).
SWEEP_ROOT = "tests/fixtures/sweep"
# Bundles the real compiler wrote for the database's kernels (--import-captures), where
# tests/fixtures/captured has none; a row runs the compiler's bundle when there is one.
SWEEP_CAPTURED = "tests/fixtures/sweep/captured"
CAPTURED_ROOT = "tests/fixtures/captured"
BUNDLE_REF = "bundle.mlir.ref"  # names, relative to its directory, a bundle.mlir kept elsewhere
REF_HEAD = ("# The compiler wrote this kernel's launch byte-identical to a file of the shared data, so it is\n"
            "# read there, in place (see the README of the folder above this one).\n")
TABLE = Path(__file__).resolve().parent / "measured.yaml"
BEGIN = "# BEGIN section 7, the database's logs: written by `python3 bench/validation/gen_fixtures.py --table`"
END = "# END section 7, the database's logs"
# The kinds of the older logs: no generated bundle, the compiler's only (captured).
OLDER_KINDS = {"neg", "gelu", "copy", "read", "sumrow", "mean", "mulbcast", "transpose", "cat0", "cat1"}
# Older-log kinds added at stop 52, each captured with the record's own LX_PLANNING (and
# BENCH_TILES): their bundle's name says which (captured_name).
OLDER_KINDS_LX = {"write", "ctsum", "transpose_outer", "softmax_row_tiling"}
OLDER_KINDS |= OLDER_KINDS_LX | {"mm"}  # mm: lxsession_mm.log's planner-split 2-D matmuls
SPAN_LIMIT = 256 << 20  # bytes one core's slice may span (hardware.md: per-core DDR span)
SEP_NOTE = ("`{op}` is the same sum compiled as {k} separate add kernels (torch-spyre's own "
            "sweep, `_sep`), the record's time their sum: the row runs the add kernel {k} times")
WORKLOADS = {
    "add": "add (2R+1W)",
    "amax": "amax over the last (stick) dim, keepdim (1R + one stick per row W)",
    "bcast": "a + b, b [1,N] broadcast over rows (2R + 1W; the cost-model sweep's `bcast`)",
    "bcastcol": "a + b, b [M,1] broadcast along each row (2R + 1W; the cost-model sweep's `bcastcol`; "
                "b kept as one stick per row)",
    "add_indep2": "two independent adds in one kernel, a + b and c + d (4R + 2W)",
    "bmm_3d2d_k_tiling": "act[4,1024,2048] @ W[2048,1024] (shared weight), K-tiled by the sweep's BENCH_TILES",
    # the older logs' kinds, as the sweep's profile_ops.py defines them
    "neg": "neg, -x (1R+1W)",
    "gelu": "gelu (1R+1W)",
    "copy": "x + 1.0 (1R+1W; the sweep's `copy`)",
    "read": "x.sum(dim=-1) (the sweep's `read`)",
    "sumrow": "x.sum(dim=-1) (the sweep's `sumrow`)",
    "mean": "x.mean(dim=-1)",
    "mulbcast": "a * b, b [1,N] broadcast over rows (the sweep's `mulbcast`)",
    "transpose": "x.transpose(0, 1).contiguous() (the stick dim moves)",
    "cat0": "torch.cat([x, x], dim=0)",
    "cat1": "torch.cat([x, x], dim=1) (along the stick dim)",
    "write": "b [1,N] + c [M,1] (both inputs broadcast: the sweep's write-only `write`)",
    "ctsum": "x.sum(dim=0) over [M,N], M coarse-tiled into BENCH_TILES chunks (spyre_hint "
             "num_tiles_per_dim) when BENCH_TILES >= 2 (the sweep's `ctsum`)",
    "transpose_outer": "x [M,T,N] -> x.transpose(0, 1).contiguous(), the two outer dims swapped, the "
                       "stick dim kept (the sweep's `transpose_outer`, T its TO_MID)",
    "mm": "a @ b, [M,K] @ [K,N], the planner's work division (the sweep's `mm`, not the forced-split `mmwd`)",
    "softmax_row_tiling": "torch.softmax(x, dim=-1) over [M,N], M coarse-tiled into BENCH_TILES chunks "
                          "(spyre_hint num_tiles_per_dim) when BENCH_TILES >= 2 (the sweep's "
                          "`softmax_row_tiling`)",
}


def mm_n(rec):
    """The sweep's `mm` N (BENCH_N, not a column): its bytes are [M,K], [K,N] and [M,N] fp16 once."""
    m, k, io = rec["rows"], rec["cols"], rec["io_hbm_bytes"]
    if io % 2 or (io // 2 - m * k) % (m + k):
        raise SystemExit(f"{SWEEP_OLDER_CSV}: record :{rec['line']}: mm io_hbm_bytes {io} is not "
                         f"2 (MK + KN + MN) for M {m}, K {k}")
    return (io // 2 - m * k) // (m + k)


def outer_mid(rec):
    """transpose_outer's middle dim (the sweep's TO_MID, not a column): its bytes are a read and a
    write of [rows, mid, cols] fp16."""
    per = 4 * rec["rows"] * rec["cols"]
    if rec["io_hbm_bytes"] % per:
        raise SystemExit(f"{SWEEP_OLDER_CSV}: record :{rec['line']}: transpose_outer io_hbm_bytes "
                         f"{rec['io_hbm_bytes']} is not 4 x rows x mid x cols")
    return rec["io_hbm_bytes"] // per


def record_shapes(rec):
    """A record's operand shapes as its row states them."""
    op, m, n = rec["op"], rec["rows"], rec["cols"]
    if op == "bmm_3d2d_k_tiling":
        return "[4,1024,2048] @ [2048,1024]"
    if op == "transpose_outer":
        return f"[{m},{outer_mid(rec)},{n}]"
    if op == "write":
        return f"[1,{n}] + [{m},1] -> [{m},{n}]"
    if op == "mm":
        return f"[{m},{n}] @ [{n},{mm_n(rec)}]"
    return f"[{m},{n}]"


def sweep_records(paths=(SWEEP_CSV, SWEEP_OLDER_CSV)):
    """The records of the database the table takes whole (the current log, then the older logs'
    kinds): [dict] with numbers parsed, in file order."""
    out = []
    for path in paths:
        with open(path, newline="") as fh:
            for r in csv.DictReader(fh):
                r = dict(r)
                r["line"] = int(r["id"].rsplit(":", 1)[1])
                for k in ("rows", "cols", "tiles", "lx", "cores", "reps", "io_hbm_bytes"):
                    r[k] = int(r[k])
                for k in ("kernel_us", "kernel_us_min", "kernel_us_std", "pred_us"):
                    r[k] = float(r[k])
                out.append(r)
    return out


def record_key(rec):
    return rec["log_file"], rec["line"]


def cited_records(source):
    """(log, record) pairs a row's source cites: `log <name>.log ... record :N` or `record(s) :N, :M`."""
    src = " ".join(str(source or "").split())
    logs = re.findall(r"log ([\w.-]+\.log)", src)
    if len(logs) != 1 or "record" not in src:
        return []
    return [(logs[0], int(n)) for n in re.findall(r":(\d+)", src.split("record", 1)[1])]


def other_model_name(rec):
    return f"torch-spyre cost model ({rec['model_sha']}, fitted to this log: in sample)"


@functools.lru_cache(maxsize=None)
def outroot_names():
    return frozenset({n for n, _, _, _ in fixtures()} | set(load_gen().PRESETS))


def home(name):
    """A fixture of fixtures() or a gen_bundle.py preset, where it is; else a new one in SWEEP_ROOT."""
    return f"{OUTROOT}/{name}" if name in outroot_names() else f"{SWEEP_ROOT}/{name}"


def sweep_generated(rec):
    """The generated bundle that stands for one record: (fixture directory, kind, params, repeat,
    lx text, note), or (None, None, None, 1, lx text, reason) when none can."""
    op, m, n, cores, lx = rec["op"], rec["rows"], rec["cols"], rec["cores"], rec["lx"]
    split = row_split(cores)
    shape = f"{m}x{n}"
    tensor = m * n * 2
    io = rec["io_hbm_bytes"]
    lx_txt = f"BENCH_TILES={rec['tiles']}, LX_PLANNING={lx} in the record"
    if op == "add":
        return (home(f"add_{shape}_c{cores}"), "binary", {"op": "add", "shape": [m, n], "split": split},
                1, "none (HBM in/out); " + lx_txt, None)
    if op == "amax":
        return (home(f"amax_{shape}_c{cores}"), "reduce",
                {"op": "max", "dim": 1, "shape": [m, n], "split": split}, 1, "none (HBM in/out); " + lx_txt, None)
    if op in ("bcast", "bcastcol"):
        how = "row" if op == "bcast" else "col"
        note = None
        if tensor > SPAN_LIMIT:
            # rows split across cores span the whole stick-column layout, more than one core may
            # reach: the compiler must have divided the stick columns instead
            split = f"out={cores}"
            note = (f"a row split would give each core a {tensor >> 20} MiB span, over the card's 256 MiB "
                    f"per-core limit, so the fixture splits the stick columns (out={cores})")
        return (f"{SWEEP_ROOT}/{op}_{shape}_c{cores}", "binary",
                {"op": "add", "shape": [m, n], "split": split, "broadcast": how}, 1,
                "none (HBM in/out); " + lx_txt, note)
    if op == "add_indep2":
        return (f"{SWEEP_ROOT}/add_indep2_{shape}_c{cores}", "addn",
                {"inputs": 4, "independent": True, "shape": [m, n], "split": split}, 1,
                "none (HBM in/out); " + lx_txt, None)
    if op.startswith("add") and op[3:].split("_")[0].isdigit():
        k = int(op[3:].split("_")[0])
        if op.endswith("_sep"):
            if io != 3 * tensor:
                raise SystemExit(f"{SWEEP_CSV}: record :{rec['line']}: {op} io_hbm_bytes {io} is not one add's")
            return (home(f"add_{shape}_c{cores}"), "binary", {"op": "add", "shape": [m, n], "split": split},
                    k - 1, "none (HBM in/out); " + lx_txt, SEP_NOTE.format(op=op, k=k - 1))
        # which way the partial sums went follows from the bytes the record moved: k inputs and the
        # output, plus a write and a read of each of the k - 2 partial sums when they are in HBM
        if io == (k + 1) * tensor:
            inter = "lx"
        elif io == (k + 1 + 2 * (k - 2)) * tensor:
            inter = "hbm"
        else:
            raise SystemExit(f"{SWEEP_CSV}: record :{rec['line']}: {op} io_hbm_bytes {io} fits neither "
                             f"placement of the partial sums")
        where = ("partial sums in LX" if inter == "lx" else
                 "partial sums through HBM" + (" (LX planning on, but they do not fit LX)" if lx else ""))
        return (f"{SWEEP_ROOT}/add{k}_{shape}_c{cores}_{inter}", "addn",
                {"inputs": k, "intermediates": inter, "shape": [m, n], "split": split}, 1,
                f"{where}; " + lx_txt, None)
    if op in OLDER_KINDS_LX:
        return (None, None, None, 1, lx_txt + ", and in the capture's compile", None)
    if op in OLDER_KINDS:
        return (None, None, None, 1, lx_txt, None)  # only a capture stands for these (sweep_plan)
    if op == "bmm_3d2d_k_tiling":
        if rec["tiles"] != 1:
            return (None, None, None, 1, lx_txt,
                    f"no fixture: K tiled into {rec['tiles']} by the sweep moved {io / 1e9:.1f} GB (the untiled "
                    f"kernel 0.03 GB) in {rec['kernel_us'] / 1000:.0f} ms; the compiler's plan for it is not "
                    f"public and the generator does not K-tile")
        return (f"{SWEEP_ROOT}/bmm3d2d_b4_1024x2048x1024_c32", "matmul",
                {"batch": 4, "m": 1024, "k": 2048, "n": 1024, "layout": "default", "split": "mb=4,out=8"}, 1,
                "none (HBM in/out); " + lx_txt,
                "B=4 and N=1024 from the sweep script's BN section and io_hbm_bytes. The fixture is the "
                "compiler's bundle for this shape (captured at stop 40), split mb 8 x out 4, the split "
                "HieronZhang's notes/bmm_data.md records for it (1x8x4x1); the generated_fixture splits "
                "mb 4 x out 8 (1153 us against the capture's 1283)")
    raise SystemExit(f"{SWEEP_CSV}: record :{rec['line']}: no plan for op {op!r}")


def captured_name(rec):
    """The directory name a bundle captured from the compiler for this record's kernel has (the
    `_sep` sums run the add kernel), or None for a kind that was not captured."""
    op, shape = rec["op"], f"{rec['rows']}x{rec['cols']}_c{rec['cores']}"
    if op == "write":
        return f"write_{rec['rows']}x{rec['cols']}_lx{rec['lx']}_c{rec['cores']}"
    if op == "mm":  # one SDSC whatever LX_PLANNING: the captures of tests/fixtures/captured's name
        return f"mm_{rec['rows']}x{rec['cols']}x{mm_n(rec)}_c{rec['cores']}"
    if op in ("ctsum", "softmax_row_tiling"):
        return f"{op}_{rec['rows']}x{rec['cols']}_t{max(rec['tiles'], 1)}_lx{rec['lx']}_c{rec['cores']}"
    if op == "transpose_outer":
        return f"transpose_outer_{rec['rows']}x{outer_mid(rec)}x{rec['cols']}_lx{rec['lx']}_c{rec['cores']}"
    if op.endswith("_sep"):
        return f"add_{shape}"
    if op in ("add", "amax", "bcast", "bcastcol", "add_indep2") or (op.startswith("add") and op[3:].isdigit()) \
            or op in OLDER_KINDS:
        return f"{op}_{shape}"
    if op == "bmm_3d2d_k_tiling" and rec["tiles"] == 1:  # captured at stop 40 (tests/fixtures/captured)
        return f"bmm3d2d_b4_1024x2048x1024_c{rec['cores']}"
    return None


def placement(bundle_dir):
    """"lx" when any SDSC of the bundle allocates an operand in LX, else "hbm"."""
    for f in sorted(Path(bundle_dir).glob("sdsc_*.json")):
        sdsc = next(iter(json.loads(f.read_text()).values()))
        for dsc in sdsc["dscs_"]:
            for node in next(iter(dsc.values()))["scheduleTree_"]:
                if node.get("component_") == "lx":
                    return "lx"
    return "hbm"


def captured_for(rec, roots=None):
    """The captured bundle (repository-relative) that stands for this record: one of the compiler's
    for its kernel, whose partial sums (add chains) went where the record's bytes say. None if none."""
    name = captured_name(rec)
    if not name:
        return None
    for root in roots or (ROOT / CAPTURED_ROOT, ROOT / SWEEP_CAPTURED):
        d = Path(root) / name
        if not any((d / n).is_file() for n in ("bundle.mlir", BUNDLE_REF)):
            continue
        gen = sweep_generated(rec)
        if gen[1] == "addn" and not gen[2].get("independent") and placement(d) != gen[2]["intermediates"]:
            continue  # the compiler kept the partial sums elsewhere than the measured kernel did
        return d
    return None


def sweep_plan(rec):
    """How one record is run: (fixture, generated fixture or None, repeat, lx text, note). The
    fixture is the compiler's bundle where one was captured (the generated one is then kept as
    `generated_fixture`), else the generated one; None when no bundle stands for the record."""
    gen, kind, _, repeat, lx_txt, note = sweep_generated(rec)
    cap = captured_for(rec)
    unwritten = gen is None and note is None  # a kind the generator does not write
    if cap is None:
        if unwritten:
            note = (f"no fixture: the compiler's bundle for this `{rec['op']}` was not captured "
                    f"and the generator does not write it")
        return gen, None, repeat, lx_txt, note
    if unwritten:
        note = "the fixture is the compiler's bundle for this kernel, captured; the generator does not write this kind"
    return str(cap.relative_to(ROOT)), gen if kind else None, repeat, lx_txt, note


def sweep_mirror(rec):
    return (f"{S7}, record :{rec['line']}, {rec['op']} {rec['rows']}x{rec['cols']}, {rec['cores']} core(s), "
            f"BENCH_TILES={rec['tiles']}, LX_PLANNING={rec['lx']}: {rec['kernel_us']} us (median of "
            f"{rec['reps']}). {ROWS_NOTE}")


def sweep_fixtures():
    """The fixtures the current log needs in SWEEP_ROOT: [(name, kind, params, mirror)], the first
    record that needs each."""
    # A record the table's rows hold with a bundle of their own and no generated_fixture (the
    # hand-written rows that run a captured bundle) needs no generated one.
    def own_bundle(r):
        fx = str(r.get("fixture") or "")
        return bool(fx) and not fx.startswith(SWEEP_ROOT + "/") and not r.get("generated_fixture")

    settled = records_held(TABLE.read_text(), own_bundle)
    out, have = [], set()
    for rec in sweep_records():
        if record_key(rec) in settled:
            continue
        fx, kind, params, _, _, _ = sweep_generated(rec)
        if not kind or Path(fx).parent != Path(SWEEP_ROOT) or Path(fx).name in have:
            continue  # no fixture, a captured one, one in OUTROOT, or one written already
        have.add(Path(fx).name)
        out.append((Path(fx).name, kind, params, sweep_mirror(rec)))
    return out


def records_held(table_text, keep=lambda r: True):
    """(log, record) pairs the M rows of `table_text` cite in their source, of the rows `keep` takes."""
    held = set()
    for r in (yaml.safe_load(table_text) or {}).get("rows") or []:
        if r.get("type") == "M" and keep(r):
            held.update(cited_records(r.get("source")))
    return held


def sweep_rows(table_text):
    """YAML rows for the records the hand-written table does not hold."""
    held = records_held(table_text)
    rows = []
    for rec in sweep_records():
        if record_key(rec) in held:
            continue
        fx, gen, repeat, lx_txt, note = sweep_plan(rec)
        op, m, n = rec["op"], rec["rows"], rec["cols"]
        k = op[3:].split("_")[0] if op.startswith("add") and op[3:4].isdigit() else None
        if k:
            wl = (f"add{k} = sum of {k} tensors, " + ("(a+b)+c..." if not op.endswith("_sep") else
                                                        "one add kernel per step"))
        else:
            wl = WORKLOADS[op]
        shapes = record_shapes(rec)
        tag = "r" if rec["log_file"] == CURRENT_LOG else rec["log_file"].split("_")[0] + "r"
        section = "7" if rec["log_file"] == CURRENT_LOG else "7o"  # 7o: the older logs (other builds)
        dims = f"{m}x{n}x{mm_n(rec)}" if op == "mm" else f"{m}x{n}"
        row = {"id": f"{op}_{dims}_c{rec['cores']}_{tag}{rec['line']}", "section": section, "type": "M",
               "workload": wl, "shapes": shapes, "dtype": "fp16", "cores": rec["cores"],
               "layout": "default; work division not recorded"
               + ("" if op == "bmm_3d2d_k_tiling" or "captured" in str(fx) else " (the fixture splits rows)"),
               "lx": lx_txt, "measured_us": rec["kernel_us"], "fixture": fx,
               "source": (f"HieronZhang/torch-spyre tools/cost_model/sweep_records.csv (the measurement database "
                          f"behind torch-spyre's cost model; log {rec['log_file']}, model {rec['model_sha']}, "
                          f"reps={rec['reps']}, median"
                          + ("" if rec["log_file"] == CURRENT_LOG else ", is_current=False: an older build")
                          + f"), record :{rec['line']}")}
        if gen and gen != fx:
            row["generated_fixture"] = gen
        if repeat != 1:
            row["repeat"] = repeat
        row["other_model"] = other_model_name(rec)
        row["other_model_us"] = rec["pred_us"]
        if note:
            row["note"] = note
        rows.append(row)
    return rows


def shared_twin(mlir):
    """The file of the shared data (../shared/spyre/data beside the repository) byte-identical to
    `mlir`, or None."""
    data = ROOT.parent / "shared" / "spyre" / "data"
    text = mlir.read_bytes()
    for f in sorted(data.glob("*.mlir")) if data.is_dir() else []:
        if f.read_bytes() == text:
            return f
    return None


def import_captures(src):
    """Copies, from a directory of captured bundles (one <name>/ per kernel, as written by the
    compiler: bundle.mlir and sdsc_*.json), those the current log's rows would run and
    tests/fixtures/captured lacks into SWEEP_CAPTURED. A bundle.mlir byte-identical to a file of
    the shared data is not copied: a bundle.mlir.ref names that file. Returns the names copied."""
    src = Path(src)
    copied = []
    for rec in sweep_records():
        d = captured_for(rec, roots=(ROOT / CAPTURED_ROOT, src))
        if d is None or d.parent != src or d.name in copied:
            continue
        if not (d / "bundle.mlir").is_file():
            raise SystemExit(f"{d}: a capture to import holds its launch as bundle.mlir; this one has none")
        out = ROOT / SWEEP_CAPTURED / d.name
        out.mkdir(parents=True, exist_ok=True)
        for f in out.iterdir():
            f.unlink()
        twin = shared_twin(d / "bundle.mlir")
        if twin is not None:
            (out / BUNDLE_REF).write_text(REF_HEAD + os.path.relpath(twin, out) + "\n")
        else:
            shutil.copyfile(d / "bundle.mlir", out / "bundle.mlir")
        for f in sorted(d.glob("sdsc_*.json")):
            shutil.copyfile(f, out / f.name)
        copied.append(d.name)
    return copied


def write_table():
    text = TABLE.read_text()
    if BEGIN in text:
        head = text[:text.index(BEGIN)].rstrip("\n") + "\n"
        tail = text[text.index(END) + len(END):].lstrip("\n") if END in text else ""
    else:
        head, tail = text.rstrip("\n") + "\n", ""
    rows = sweep_rows(head + tail)
    body = yaml.safe_dump(rows, sort_keys=False, width=110, allow_unicode=True)
    body = "\n".join(line for line in body.split("\n"))
    TABLE.write_text(head + BEGIN + "\n" + body.rstrip("\n") + "\n" + END + "\n" + tail)
    return len(rows)


def load_gen():
    spec = importlib.util.spec_from_file_location("gen_bundle", ROOT / "scripts" / "gen_bundle.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--outroot", default=OUTROOT, help=f"default {OUTROOT} (repository-relative)")
    ap.add_argument("--import-captures", metavar="DIR",
                    help=f"copy the compiler's bundles for the current log's kernels from DIR/<name>/ into "
                         f"{SWEEP_CAPTURED} (those tests/fixtures/captured lacks)")
    ap.add_argument("--table", action="store_true",
                    help="(re)write the current-log rows of measured.yaml (between the BEGIN/END markers)")
    a = ap.parse_args(argv)
    if a.import_captures:
        names = import_captures(a.import_captures)
        print(f"{len(names)} captured bundles copied into {SWEEP_CAPTURED}")
        return 0
    if a.table:
        print(f"{write_table()} rows of the database's logs written to {TABLE}")
        return 0
    todo = [(a.outroot, *f) for f in fixtures()] + [(SWEEP_ROOT, *f) for f in sweep_fixtures()]
    if a.list:
        for root, name, kind, params, _ in todo:
            print(f"{root}/{name:32s} {kind:7s} {json.dumps(params, sort_keys=True)}")
        return 0
    gen = load_gen()
    os.chdir(ROOT)
    for root, name, kind, params, mirror in todo:
        outdir = f"{root}/{name}"
        cmd = "python3 scripts/gen_bundle.py " + " ".join(
            [kind, outdir] + [f"-p '{k}={v if isinstance(v, str) else json.dumps(v, separators=(',', ':'))}'"
                              for k, v in params.items()])
        gen.generate(kind, outdir, dict(params), command=cmd)
        readme = Path(outdir) / "README.md"
        lines = readme.read_text().split("\n")
        for i, line in enumerate(lines):
            if line.startswith("Mirrors: "):
                lines[i] = "Mirrors: " + mirror
                lines.insert(i + 1, "\nWritten by `python3 bench/validation/gen_fixtures.py` "
                             "(the command above plus this Mirrors line); a row of "
                             "`bench/validation/measured.yaml`.")
                break
        readme.write_text("\n".join(lines))
        print(outdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
