"""Tests of scripts/vspyre_validate.py (issue 6: the measured-kernel validation).

Run with: VSPYRE_BIN=build/dev/cli/vspyre python3 -m pytest -q tests/python/test_validate.py
Most tests use a stand-in vspyre (a small Python script printing fixed kernel times), so they
need no build; the end-to-end test runs the real binary on two fixtures ($VSPYRE_BIN, else the
binary the script would find) and is skipped when there is none.
"""
import csv
import io
import json
import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "vspyre_validate.py"
sys.path.insert(0, str(SCRIPT.parent))
import vspyre_validate as vv  # noqa: E402

BUNDLES = ROOT / "tests" / "fixtures" / "bundles"


# ----------------------------------------------------------------------------------- statistics

def test_mape_known_values():
    assert vv.mape([110, 90], [100, 100]) == pytest.approx(10.0)
    assert vv.mape([150, 50, 100], [100, 100, 100]) == pytest.approx(100.0 / 3)
    assert vv.mape([2.0], [1.0]) == pytest.approx(100.0)
    with pytest.raises(ValueError):
        vv.mape([], [])


def test_pearson_known_values():
    assert vv.pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert vv.pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # x = 1..4, y = 1,3,2,4: sxy = 4, sxx = syy = 5 -> 0.8
    assert vv.pearson([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert vv.pearson([1, 1, 1], [1, 2, 3]) is None
    assert vv.pearson([1], [1]) is None


def test_spearman_with_ties():
    assert vv.ranks([10, 20, 20, 30]) == [1, 2.5, 2.5, 4]
    assert vv.ranks([5, 5, 5]) == [2, 2, 2]
    # ranks [1, 2.5, 2.5, 4] vs [1, 3, 2, 4]: sxy = 4.5, sxx = 4.5, syy = 5
    assert vv.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / math.sqrt(4.5 * 5))
    # monotone but non-linear: rank correlation 1, Pearson less
    x, y = [1, 2, 3, 4, 5], [1, 10, 100, 1000, 10000]
    assert vv.spearman(x, y) == pytest.approx(1.0)
    assert vv.pearson(x, y) < 0.9


def test_summary_and_direction():
    s = vv.summarize([200, 50], [100, 100], ["a", "b"])
    assert s["mape_percent"] == pytest.approx(75.0)
    assert s["max_error_percent"] == pytest.approx(100.0) and s["max_error_row"] == "a"
    assert s["bias_geomean_ratio"] == pytest.approx(1.0) and s["bias_sign"] == "0"
    assert vv.summarize([120, 130], [100, 100], ["a", "b"])["bias_sign"] == "+"
    assert vv.direction(0.5, 0.05) == "faster"
    assert vv.direction(1.04, 0.05) == "same"
    assert vv.direction(0.96, 0.05) == "same"
    assert vv.direction(1.36, 0.05) == "slower"


# ------------------------------------------------------------------------ stand-in vspyre runs

FAKE = textwrap.dedent("""\
    #!{py}
    import json, os, sys
    times = json.load(open({times!r}))
    if sys.argv[1] == "--version":
        print("vspyre fake"); sys.exit(0)
    if sys.argv[1] == "describe":  # the config check before the fixtures
        cfg = open(sys.argv[3]).read()
        if "banana" in cfg:
            sys.stderr.write("vspyre: error: " + sys.argv[3] + ":2:17: card.core.count: expected an integer\\n"); sys.exit(1)
        print("[]"); sys.exit(0)
    name = os.path.basename(os.path.normpath(sys.argv[2]))
    if name not in times:
        sys.stderr.write("vspyre: error: cannot load " + name + "\\n"); sys.exit(2)
    t = times[name]
    print(json.dumps({{"kernel_time_us": t, "stages": [{{"name": "launch", "time_us": 1.0}},
                      {{"name": "sdsc_0.json 0_op", "time_us": t - 1.0}}]}}))
    """)


@pytest.fixture
def fake(tmp_path):
    """(make_table, set_times, vspyre path): a stand-in binary and bundle dirs a..e in tmp_path."""
    times = tmp_path / "times.json"
    times.write_text("{}")
    exe = tmp_path / "fake_vspyre"
    exe.write_text(FAKE.format(py=sys.executable, times=str(times)))
    exe.chmod(0o755)
    for n in "abcde":
        (tmp_path / n).mkdir()
        (tmp_path / n / "bundle.mlir").write_text("")

    def set_times(**kw):
        times.write_text(json.dumps(kw))

    def make_table(rows, name="t.yaml"):
        for r in rows:
            if isinstance(r.get("fixture"), list):
                r["fixture"] = [str(tmp_path / f) for f in r["fixture"]]
            elif r.get("fixture"):
                r["fixture"] = str(tmp_path / r["fixture"])
        f = tmp_path / name
        f.write_text(yaml.safe_dump({"schema": 1, "rows": rows}, sort_keys=False))
        return f

    return make_table, set_times, str(exe)


def m_row(i, fx, us, **kw):
    return {"id": i, "section": "x", "type": "M", "measured_us": us, "fixture": fx, **kw}


def test_prediction_rows_are_not_counted(fake):
    make_table, set_times, exe = fake
    set_times(a=110.0, b=90.0, c=1000.0)
    t = make_table([m_row("ra", "a", 100.0), m_row("rb", "b", 100.0),
                    {"id": "pc", "section": "x", "type": "P", "predicted_us": 1.0, "fixture": "c"},
                    {"id": "nofx", "section": "x", "type": "M", "measured_us": 5.0}])
    res = vv.validate(t, vspyre=exe, jobs=2)
    assert res["n_counted"] == 2
    assert res["mape_percent"] == pytest.approx(10.0)
    assert res["max_error_percent"] == pytest.approx(10.0)
    pc = next(o for o in res["rows"] if o["id"] == "pc")
    assert pc["predicted"] == 1000.0 and pc["counted"] is False
    assert next(o for o in res["rows"] if o["id"] == "nofx")["status"] == "no fixture"


def test_section_mean_weighs_each_section_the_same(fake):
    make_table, set_times, exe = fake
    set_times(a=110.0, b=90.0, c=100.0)
    t = make_table([m_row("ra", "a", 100.0, section="s1"), m_row("rb", "b", 100.0, section="s1"),
                    m_row("rc", "c", 50.0, section="s2")])
    res = vv.validate(t, vspyre=exe, jobs=2)
    assert res["sections"]["s1"]["mape_percent"] == pytest.approx(10.0)
    assert res["sections"]["s2"]["mape_percent"] == pytest.approx(100.0)
    assert res["mape_percent"] == pytest.approx(40.0)               # 10 + 10 + 100 over 3 rows
    assert res["mape_section_mean_percent"] == pytest.approx(55.0)  # (10 + 100) / 2


def test_workloads_split_the_mape_into_points_that_add_up(fake):
    make_table, set_times, exe = fake
    set_times(a=110.0, b=50.0, c=100.0)
    t = make_table([m_row("rc", "c", 80.0, workload="neg "), m_row("ra", "a", 100.0, workload="add"),
                    m_row("rb", "b", 100.0, workload="add")])
    res = vv.validate(t, vspyre=exe, jobs=2)
    wl = res["workloads"]
    assert list(wl) == ["add", "neg"]                  # largest share first; text trimmed
    assert wl["add"]["n"] == 2 and wl["add"]["rows_over_25_percent"] == 1
    assert wl["add"]["mape_percent"] == pytest.approx(30.0)               # (10 + 50) / 2
    assert wl["add"]["mean_signed_error_percent"] == pytest.approx(-20.0)  # (+10 - 50) / 2
    assert wl["add"]["worst_row"] == "rb" and wl["add"]["worst_error_percent"] == pytest.approx(-50.0)
    assert wl["neg"]["mape_percent"] == pytest.approx(25.0)
    assert wl["add"]["mape_points"] == pytest.approx(20.0) and wl["neg"]["mape_points"] == pytest.approx(25.0 / 3)
    assert sum(v["mape_points"] for v in wl.values()) == pytest.approx(res["mape_percent"])
    buf = io.StringIO()
    vv.report(res, out=buf)
    out = buf.getvalue()
    assert "by workload" in out and out.index("    add ") < out.index("    neg ")


def test_seeds_report_how_far_mape_and_rows_move_with_the_launch_seed(fake, tmp_path, capsys):
    make_table, set_times, exe = fake
    set_times(a=110.0, b=90.0)
    # A stand-in that reads card.launch_seed from the overlay config --seeds writes: row `a` moves
    # by 10 % per seed, row `b` not at all.
    seeded = tmp_path / "seeded_vspyre"
    seeded.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import json, os, re, subprocess, sys
        cfg = sys.argv[sys.argv.index("--config") + 1] if "--config" in sys.argv else ""
        m = re.search(r"launch_seed: (\\d+)", open(cfg).read()) if cfg else None
        out = subprocess.run([{exe!r}] + sys.argv[1:], capture_output=True, text=True)
        if out.returncode or sys.argv[1] != "run":
            sys.stdout.write(out.stdout); sys.stderr.write(out.stderr); sys.exit(out.returncode)
        d = json.loads(out.stdout)
        if m and os.path.basename(os.path.normpath(sys.argv[2])) == "a":
            d["kernel_time_us"] *= 1 + 0.1 * int(m.group(1))
        print(json.dumps(d))
        """))
    seeded.chmod(0o755)
    t = make_table([m_row("ra", "a", 100.0), m_row("rb", "b", 100.0)])
    cfg = tmp_path / "card.yaml"
    cfg.write_text("card: {}\n")
    out = tmp_path / "out"
    rc = vv.main(["--table", str(t), "--config", str(cfg), "--vspyre", str(seeded), "--json", "--no-plot",
                  "--out", str(out), "--seeds", "1,2"])
    assert rc == 0
    res = json.loads(capsys.readouterr().out)
    ls = res["launch_seeds"]
    assert ls["seeds"] == ["config", 1, 2]
    # the config's own run: a 110 (+10 %), b 90 (-10 %); seed 1: a 121; seed 2: a 132
    assert ls["mape_percent"] == pytest.approx([10.0, 15.5, 21.0])
    assert ls["rows_compared"] == 2 and ls["rows_spread_over_5_percent"] == 1
    assert ls["widest"][0]["id"] == "ra" and ls["widest"][0]["spread_percent"] == pytest.approx(20.0)
    ra = next(o for o in res["rows"] if o["id"] == "ra")
    assert ra["seed_range_us"] == pytest.approx([110.0, 132.0])
    assert res["mape_percent"] == pytest.approx(10.0)  # the table itself stays the config's
    # The overlay includes the user's config: it is not replaced.
    assert "include" in vv.seed_overlay(cfg, 3, tmp_path).read_text()
    with pytest.raises(SystemExit) as e:
        vv.main(["--table", str(t), "--vspyre", str(seeded), "--seeds", "2,x"])
    assert e.value.code == 2
    assert "--seeds" in capsys.readouterr().err


def test_repeat_multiplies_the_kernel_time(fake):
    make_table, set_times, exe = fake
    set_times(a=110.0)
    t = make_table([m_row("once", "a", 100.0), m_row("thrice", "a", 300.0, repeat=3)])
    res = vv.validate(t, vspyre=exe, jobs=2)
    rows = {o["id"]: o for o in res["rows"]}
    assert rows["once"]["predicted"] == 110.0 and rows["once"]["repeat"] == 1
    assert rows["thrice"]["predicted"] == pytest.approx(330.0) and rows["thrice"]["repeat"] == 3
    assert rows["thrice"]["error_percent"] == pytest.approx(10.0)
    assert res["n_counted"] == 2


def test_other_model_is_compared_on_its_own_rows(fake):
    make_table, set_times, exe = fake
    set_times(a=110.0, b=90.0, c=100.0)
    t = make_table([m_row("ra", "a", 100.0, other_model="cm", other_model_us=130.0),
                    m_row("rb", "b", 100.0, other_model="cm", other_model_us=100.0),
                    m_row("rc", "c", 50.0)])
    res = vv.validate(t, vspyre=exe, jobs=2)
    cm = res["other_models"]["cm"]
    assert cm["n"] == 2
    assert cm["mape_percent"] == pytest.approx(15.0)         # |130-100| and 0 over 100
    assert cm["vspyre_mape_percent"] == pytest.approx(10.0)  # the same two rows, not rc
    assert cm["rows_over_25_percent"] == 1 and cm["vspyre_rows_over_25_percent"] == 0
    assert res["n_counted"] == 3


def test_ratio_rows_and_directions(fake):
    make_table, set_times, exe = fake
    set_times(a=100.0, b=50.0, c=100.0, d=130.0)
    t = make_table([m_row("base", "a", 100.0), m_row("opt", "b", 80.0),
                    m_row("one", "c", 10.0), m_row("four", "d", 20.0),
                    {"id": "r_opt", "section": "x", "type": "M-ratio", "numerator": "opt",
                     "denominator": "base"},
                    {"id": "r_cores", "section": "x", "type": "M-ratio", "numerator": "four",
                     "denominator": "one", "measured_ratio": 0.9},
                    {"id": "r_paper", "section": "x", "type": "M-ratio", "measured_ratio": 2.5},
                    {"id": "stage", "section": "x", "type": "M", "measured_us": 49.0,
                     "fixture": "b", "metric": "stage:0_op"}])
    res = vv.validate(t, vspyre=exe)
    by = {o["id"]: o for o in res["rows"]}
    assert by["r_opt"]["measured"] == pytest.approx(0.8)
    assert by["r_opt"]["predicted"] == pytest.approx(0.5)
    assert by["r_opt"]["direction_reproduced"] is True
    assert by["r_cores"]["measured"] == pytest.approx(0.9)       # explicit measured_ratio wins
    assert by["r_cores"]["direction_measured"] == "faster"
    assert by["r_cores"]["direction_predicted"] == "slower"
    assert by["r_paper"]["status"] == "no fixture"
    assert by["stage"]["predicted"] == pytest.approx(49.0)
    assert res["ratio"]["directions_reproduced"] == 1 and res["ratio"]["directions_total"] == 2
    assert res["ratio"]["not_reproduced"] == ["r_cores"]
    assert res["n_counted"] == 5                                 # ratios are not counted


def range_row(i, fx, lo, hi, **kw):
    return {"id": i, "section": "x", "type": "M", "measured_range_us": [lo, hi], "fixture": fx, **kw}


def test_range_rows_need_every_fixture_inside_and_are_not_counted(fake, tmp_path):
    make_table, set_times, exe = fake
    set_times(a=100.0, b=3.0, c=10.0, d=30.0)
    t = make_table([m_row("ra", "a", 100.0),
                    range_row("inside", ["b", "c"], 2.0, 24.0),
                    range_row("one_out", ["b", "c", "d"], 2.0, 24.0),
                    range_row("single", "c", 10.0, 12.0),          # bounds are inclusive
                    range_row("staged", ["c", "d"], 8.0, 30.0, metric="stage:0_op"),
                    range_row("nofx", None, 1.0, 2.0)])
    res = vv.validate(t, vspyre=exe, jobs=2)
    by = {o["id"]: o for o in res["rows"]}
    assert res["n_counted"] == 1 and res["mape_percent"] == pytest.approx(0.0)
    assert by["inside"]["range_reproduced"] is True and by["inside"]["in_range"] == 2
    assert by["inside"]["predicted_min"] == 3.0 and by["inside"]["predicted_max"] == 10.0
    assert by["inside"].get("predicted") is None and by["inside"]["counted"] is False
    assert by["one_out"]["range_reproduced"] is False and by["one_out"]["in_range"] == 2
    assert by["single"]["range_reproduced"] is True and by["single"]["predicted"] == 10.0
    assert by["staged"]["predicted_each"] == {str(tmp_path / "c"): 9.0, str(tmp_path / "d"): 29.0}
    assert by["staged"]["range_reproduced"] is True
    assert by["nofx"]["status"] == "no fixture" and "in_range" not in by["nofx"]
    assert res["range"] == {"n": 4, "reproduced": 3, "not_reproduced": ["one_out"]}
    out = __import__("io").StringIO()
    vv.report(res, out)
    text = out.getvalue()
    assert "range: 2/3 fixture(s) in range, NOT reproduced" in text
    assert "3/4 reproduced" in text and "range not reproduced   one_out" in text
    vv.write_csv(res, tmp_path / "v.csv")
    got = {r["id"]: r for r in csv.DictReader(open(tmp_path / "v.csv"))}
    assert got["inside"]["measured"] == "2.0-24.0" and got["inside"]["predicted"] == "3-10"
    # a failing fixture makes the row an error, listed with the failures
    set_times(a=100.0, b=3.0)
    res = vv.validate(t, vspyre=exe, jobs=2, select="inside")
    assert res["rows"][0]["status"].startswith("error:") and res["range"]["n"] == 0
    assert res["failed"] and res["failed"][0]["id"] == "inside"


def two_row_baseline(fake, tmp_path):
    """Rows ra and rb (measured 100 us each) predicted 110 and 90 us (MAPE 10), written as the
    baseline; returns (baseline path, the arguments that check against it)."""
    make_table, set_times, exe = fake
    t = make_table([m_row("ra", "a", 100.0), m_row("rb", "b", 100.0)])
    base = tmp_path / "baseline.json"
    set_times(a=110.0, b=90.0)
    assert vv.main(["--table", str(t), "--vspyre", exe, "--out", str(tmp_path / "o"), "-q",
                    "--write-baseline", str(base)]) == 0
    return base, ["--table", str(t), "--vspyre", exe, "--out", str(tmp_path / "o"), "-q",
                  "--check-baseline", str(base)]


def test_baseline_check_fails_when_mape_rises_more_than_a_point(fake, tmp_path, capsys):
    make_table, set_times, exe = fake
    base, args = two_row_baseline(fake, tmp_path)
    assert json.loads(base.read_text())["mape_percent"] == pytest.approx(10.0)
    set_times(a=110.0, b=89.2)                                   # MAPE 10.4: within a point
    assert vv.main(args) == 0
    set_times(a=110.0, b=88.0)                                   # MAPE 11.0: exactly a point
    assert vv.main(args) == 0
    capsys.readouterr()
    set_times(a=110.0, b=87.0)                                   # MAPE 11.5: fails
    assert vv.main(args) == 1
    err = capsys.readouterr().err
    assert "FAILED" in err and "MAPE rose" in err and "rb" in err
    set_times(a=110.0, b=87.0)
    assert vv.main(args + ["--tolerance", "2"]) == 0
    set_times(a=100.0)                                           # a fixture fails: check fails
    assert vv.main(args) == 1
    assert "failed" in capsys.readouterr().err
    # a row added since the baseline: compared on the rows both have, with a note
    t2 = make_table([m_row("ra", "a", 100.0), m_row("rb", "b", 100.0), m_row("rc", "c", 1.0)],
                    name="t2.yaml")
    set_times(a=110.0, b=90.0, c=100.0)
    assert vv.main(["--table", str(t2), "--vspyre", exe, "--out", str(tmp_path / "o"), "-q",
                    "--check-baseline", str(base)]) == 0
    err = capsys.readouterr().err
    assert "over the 2 rows both have" in err and "not in the baseline: rc" in err


def check_usage_error(capsys, argv, words):
    """vv.main(argv) is a usage error: exit 2 and one stderr line, `vspyre validate: error: ...`
    saying `words`."""
    assert vv.main(argv) == 2, argv
    err = capsys.readouterr().err
    assert err.startswith("vspyre validate: error: ") and words in err, (argv, err)
    assert len(err.strip().splitlines()) == 1, err


def test_bad_arguments_are_one_line_errors_before_any_fixture_runs(fake, tmp_path, capsys):
    # Each was a traceback, or an error only after every fixture had run, or a silent pass.
    make_table, set_times, exe = fake
    t = make_table([m_row("ra", "a", 100.0), m_row("rb", "b", 100.0)])
    set_times(a=110.0, b=90.0)
    afile = tmp_path / "afile"
    afile.write_text("keep")
    notutf = tmp_path / "bin.yaml"
    notutf.write_bytes(b"\xff\xfe")
    badcfg = tmp_path / "bad.yaml"
    badcfg.write_text("card:\n  core: {count: banana}\n")
    listrows = tmp_path / "b1.json"
    listrows.write_text('{"mape_percent": 14.0, "rows": []}')
    nullrows = tmp_path / "b2.json"
    nullrows.write_text('{"mape_percent": 14.0, "rows": {"ra": {"predicted_us": null}}}')
    base = ["--table", str(t), "--vspyre", exe, "-q", "--no-plot"]
    for extra, words in (
            (["--rows", "["], "--rows: '[' is not a regular expression"),
            (["--rows", "zzz"], "--rows: no row's id or section matches 'zzz'"),
            (["--out", str(afile)], "exists and is not a directory"),
            (["--out", str(afile / "sub")], "--out: cannot create"),
            (["--config", str(badcfg)], "card.core.count: expected an integer"),
            (["--check-baseline", str(listrows)], "`rows` must map each row id"),
            (["--check-baseline", str(nullrows)], "no row of `rows` has a numeric `error_percent`")):
        out = tmp_path / "o_fresh"
        check_usage_error(capsys, base + ["--out", str(out)] + extra, words)
        assert not (out / "validation.csv").exists(), extra  # nothing ran
        if "--out" not in extra:
            assert not out.exists(), extra  # nor was --out made
    assert vv.main(["--table", str(notutf), "--vspyre", exe, "-q", "--out", str(tmp_path / "o")]) == 2
    assert "not a UTF-8 text file" in capsys.readouterr().err
    schema7 = tmp_path / "s7.yaml"
    schema7.write_text(t.read_text().replace("schema: 1", "schema: 7"))
    assert vv.main(["--table", str(schema7), "--vspyre", exe, "-q", "--out", str(tmp_path / "o")]) == 2
    assert "`schema: 7` is not a table this script reads" in capsys.readouterr().err
    assert afile.read_text() == "keep"
    for extra in (["--jobs", "0"], ["--same-band", "-5"], ["--seeds", "99999999999999999999"],
                  ["--timeout", "inf"], ["--timeout", "0"], ["--tolerance", "nan"], ["--tolerance", "-1"]):
        with pytest.raises(SystemExit):
            vv.main(base + extra)
    # A --rows subset cannot be held against a baseline that has no rows: it failed to say so and
    # compared the subset's MAPE with the whole table's.
    norows = tmp_path / "b3.json"
    norows.write_text('{"mape_percent": 14.0}')
    assert vv.main(base + ["--out", str(tmp_path / "o"), "--rows", "ra", "--check-baseline", str(norows)]) == 1
    assert "lists no rows, so a --rows subset cannot be compared with it" in capsys.readouterr().err


def test_outputs_never_overwrite_the_inputs_or_each_other(fake, tmp_path, capsys):
    # --write-baseline onto the table or the config replaced it; --table D/validation.json (or
    # .csv) --out D overwrote the table; --write-baseline D/validation.json --out D wrote one output
    # over the other. Each is refused before anything runs, comparing files by identity.
    make_table, set_times, exe = fake
    t = make_table([m_row("ra", "a", 100.0), m_row("rb", "b", 100.0)])
    set_times(a=110.0, b=90.0)
    cfg = tmp_path / "card.yaml"
    cfg.write_text("card: {}\n")
    d = tmp_path / "D"
    d.mkdir()
    for n in ("validation.json", "validation.csv"):
        (d / n).write_text(t.read_text())
    (tmp_path / "hard.yaml").unlink(missing_ok=True)
    os.link(t, tmp_path / "hard.yaml")
    (tmp_path / "link.yaml").symlink_to(t)
    base = tmp_path / "base.json"
    base.write_text('{"mape_percent": 10.0}')
    kept = {f: f.read_bytes() for f in (t, cfg, d / "validation.json", d / "validation.csv", base)}
    common = ["--vspyre", exe, "-q", "--config", str(cfg)]
    fresh = tmp_path / "fresh"
    for args, words in (
            (["--table", t, "--write-baseline", t, "--out", fresh],
             f"--write-baseline: {t} is the measurement table (--table), which it would overwrite"),
            (["--table", t, "--write-baseline", tmp_path / "hard.yaml", "--out", fresh], "is the measurement table"),
            (["--table", tmp_path / "link.yaml", "--write-baseline", t, "--out", fresh], "is the measurement table"),
            (["--table", t, "--write-baseline", cfg, "--out", fresh], "is the card config (--config)"),
            (["--table", d / "validation.json", "--out", d],
             f"--out: {d / 'validation.json'} is the measurement table (--table)"),
            (["--table", d / "validation.csv", "--out", d, "--no-plot"],
             f"--out: {d / 'validation.csv'} is the measurement table (--table)"),
            (["--table", t, "--write-baseline", fresh / "validation.json", "--out", fresh],
             f"--write-baseline: {fresh / 'validation.json'} is the same file as {fresh / 'validation.json'}, "
             "which --out writes too"),
            (["--table", t, "--write-baseline", base, "--check-baseline", base, "--out", fresh],
             "is the baseline checked against (--check-baseline)"),
            (["--table", t, "--check-baseline", d / "validation.json", "--out", d], "is the baseline checked against")):
        check_usage_error(capsys, common + [str(x) for x in args], words)
        assert not fresh.exists(), args  # nothing ran, nothing was made
        for f, b in kept.items():
            assert f.read_bytes() == b, (args, f)
    # Through the script: the exit code of a usage error.
    r = subprocess.run([sys.executable, str(SCRIPT), "--table", str(t), "--write-baseline", str(t)] + common,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "is the measurement table" in r.stderr and "Traceback" not in r.stderr
    # Distinct files are still written.
    assert vv.main(common + ["--table", str(t), "--out", str(fresh), "--write-baseline", str(tmp_path / "b2.json"),
                             "--no-plot"]) == 0
    assert (fresh / "validation.json").exists() and (tmp_path / "b2.json").exists()


def test_help_says_which_binary_runs_through_vspyre_validate(fake, tmp_path, capsys, monkeypatch):
    # --help said --vspyre defaults to $VSPYRE_BIN, but `vspyre validate` passes --vspyre <itself>
    # first, so $VSPYRE_BIN is never read there; the help now says so.
    h = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60).stdout
    h = " ".join(h.split())
    assert "`vspyre validate` passes the binary it was run as, so $VSPYRE_BIN is not read there" in h, h
    assert "default: $VSPYRE_BIN" not in h
    make_table, set_times, exe = fake
    t = make_table([m_row("ra", "a", 100.0)])
    set_times(a=110.0)
    monkeypatch.setenv("VSPYRE_BIN", str(tmp_path / "no_such_vspyre"))
    as_binary = ["--vspyre", exe, "--table", str(t), "-q", "--no-plot", "--out", str(tmp_path / "o")]
    assert vv.main(as_binary) == 0
    capsys.readouterr()
    assert vv.main(as_binary + ["--vspyre", str(tmp_path / "mine")]) == 2
    assert str(tmp_path / "mine") in capsys.readouterr().err


def test_baseline_check_names_rows_that_moved_even_when_mape_did_not(fake, tmp_path, capsys):
    _, set_times, _ = fake
    _, args = two_row_baseline(fake, tmp_path)                   # ra 110, rb 90: MAPE 10
    capsys.readouterr()
    set_times(a=110.0, b=90.0)                                   # nothing moved
    assert vv.main(args) == 0
    assert "0 of the 2 rows the baseline also predicted moved by more than 5 %" in capsys.readouterr().err
    set_times(a=90.0, b=110.0)                                   # MAPE still 10, both moved
    assert vv.main(args) == 0
    err = capsys.readouterr().err
    assert "passed" in err and "2 of the 2 rows the baseline also predicted moved by more than 5 %" in err
    assert "ra: 110 -> 90 us (-18.2 %)" in err and "rb: 90 -> 110 us (+22.2 %)" in err
    assert err.index("rb: 90") < err.index("ra: 110")              # the largest change first
    set_times(a=112.0, b=90.0)                                   # 1.8 %: below the mark
    assert vv.main(args) == 0
    assert "0 of the 2 rows" in capsys.readouterr().err


@pytest.mark.parametrize("row, words", [
    ({"id": "bad", "section": "x", "measured_us": 1.0}, ["`type`", "'bad'"]),
    ({"id": "bad", "section": "x", "type": "M", "measured_us": -3}, ["measured_us", "positive"]),
    ({"id": "bad", "section": "x", "type": "M"}, ["needs `measured_us`"]),
    ({"id": "bad", "section": "x", "type": "P", "measured_us": 3.0}, ["predicted_us"]),
    ({"id": "bad", "section": "x", "type": "M", "measured_us": 1.0, "fixture": "nope"},
     ["not a bundle directory"]),
    ({"id": "bad", "section": "x", "type": "M-ratio", "numerator": "ra", "denominator": "zz"},
     ["denominator 'zz'"]),
    ({"id": "bad", "section": "x", "type": "M", "measured_us": 1.0, "mesured": 2},
     ["unknown field", "mesured"]),
    ({"id": "ra", "section": "x", "type": "M", "measured_us": 1.0}, ["duplicate id"]),
    ({"id": "bad", "section": "x", "type": "M", "measured_us": 1.0, "fixture": ["a", "b"]},
     ["list of fixtures", "range row"]),
    ({"id": "bad", "section": "x", "type": "M", "measured_range_us": [3.0, 2.0]}, ["lo <= hi"]),
    ({"id": "bad", "section": "x", "type": "M", "measured_range_us": [1.0, 2.0], "fixture": []},
     ["non-empty list"]),
    ({"id": "bad", "section": "x", "type": "M", "measured_range_us": [1.0, 2.0],
      "fixture": ["a", "nope"]}, ["not a bundle directory"]),
    ({"id": "bad", "section": "x", "type": "M", "measured_us": 1.0, "fixture": "a", "repeat": 0},
     ["`repeat`", "whole number"]),
    ({"id": "bad", "section": "x", "type": "M", "measured_us": 1.0, "fixture": "a", "repeat": 1.5},
     ["`repeat`", "whole number"]),
    ({"id": "bad", "section": "x", "type": "P", "predicted_us": 1.0, "fixture": "a", "repeat": 2},
     ["`repeat` is for an M row"]),
    ({"id": "bad", "section": "x", "type": "M", "measured_us": 1.0, "other_model_us": 2.0},
     ["`other_model`", "go together"]),
    ({"id": "bad", "section": "x", "type": "M", "measured_us": 1.0, "other_model": "m",
      "other_model_us": -2.0}, ["other_model_us", "positive"]),
])
def test_bad_table_names_file_and_row(fake, tmp_path, capsys, row, words):
    make_table, _, exe = fake
    t = make_table([m_row("ra", "a", 100.0), row])
    with pytest.raises(vv.ValidateError) as e:
        vv.load_table(t)
    msg = str(e.value)
    assert str(t) in msg and "row 2" in msg and "line" in msg
    for w in words:
        assert w in msg
    assert vv.main(["--table", str(t), "--vspyre", exe, "-q", "--out", str(tmp_path / "o")]) == 2
    assert "row 2" in capsys.readouterr().err


def test_split_must_match_the_fixture(tmp_path):
    """A row that records a matmul split is predicted from a fixture with that split."""
    gen = str(BUNDLES / "mm_2048x512x2048_c32")                    # generated, mb=4 out=8
    cap = str(ROOT / "tests" / "fixtures" / "captured" / "mm_2048x512x2048_c32")  # mb=8 out=4
    base = {"section": "x", "type": "M", "measured_us": 157.5}
    t = tmp_path / "t.yaml"
    t.write_text(yaml.safe_dump({"rows": [dict(base, id="ok", split="4x8", fixture=gen)]}))
    assert [r["id"] for r in vv.load_table(t)] == ["ok"]
    t.write_text(yaml.safe_dump({"rows": [dict(base, id="swapped", split="4x8", fixture=cap)]}))
    with pytest.raises(vv.ValidateError, match=r"split` 4x8 .*divides the work mb=8, out=4"):
        vv.load_table(t)
    t.write_text(yaml.safe_dump({"rows": [dict(base, id="odd", split="4 by 8", fixture=gen)]}))
    with pytest.raises(vv.ValidateError, match="must be written MxN"):
        vv.load_table(t)


def test_table_not_a_list(tmp_path):
    t = tmp_path / "t.yaml"
    t.write_text("rows: 3\n")
    with pytest.raises(vv.ValidateError, match="non-empty list `rows`"):
        vv.load_table(t)
    with pytest.raises(vv.ValidateError, match="cannot read"):
        vv.load_table(tmp_path / "missing.yaml")


def test_a_key_given_twice_in_the_table_is_refused(tmp_path):
    # PyYAML kept the last `measured` of a row silently.
    t = tmp_path / "t.yaml"
    t.write_text("rows:\n  - id: a\n    type: M\n    measured: 10\n    measured: 20\n")
    with pytest.raises(vv.ValidateError, match=r"t.yaml:5:5: duplicate key 'measured'"):
        vv.load_table(t)


def test_committed_table_loads():
    rows = vv.load_table(vv.DEFAULT_TABLE)
    types = {r["type"] for r in rows}
    assert types == {"M", "M-ratio", "P"}
    assert all(r.get("source") for r in rows)
    base = json.loads(vv.DEFAULT_BASELINE.read_text())
    assert base["n_counted"] == sum(1 for r in rows if r["type"] == "M" and r.get("fixture")
                                    and not vv.is_range_row(r))


def test_no_row_that_runs_a_fixture_says_it_has_none():
    """A row's note must not contradict its fixture field (350 older-log rows once said "no
    fixture" while running a captured bundle)."""
    rows = vv.load_table(vv.DEFAULT_TABLE)
    wrong = [r["id"] for r in rows if r.get("fixture") and "no fixture" in str(r.get("note") or "")]
    assert not wrong, wrong[:5]


def test_every_bundle_the_table_names_is_in_the_repository():
    """fixture, generated_fixture and captured_fixture name directories of this repository (two
    generated_fixture lines once named bundles gen_fixtures.py wrote but nobody committed)."""
    rows = vv.load_table(vv.DEFAULT_TABLE)
    named = [(r["id"], k, p) for r in rows for k in ("fixture", "generated_fixture", "captured_fixture")
             for p in ([r[k]] if isinstance(r.get(k), str) else (r.get(k) or []))]
    assert len(named) > 800
    missing = [(i, k, p) for i, k, p in named if not (ROOT / p / "sdsc_0.json").is_file()]
    assert not missing, missing[:5]


def test_database_rows_are_what_the_script_writes():
    """The rows between the BEGIN/END markers are gen_fixtures.py --table's output from
    sweep_current.csv and sweep_older.csv: every record of them is in the table exactly once."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("gen_fixtures", ROOT / "bench" / "validation" / "gen_fixtures.py")
    gf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gf)
    text = vv.DEFAULT_TABLE.read_text()
    assert text.count(gf.BEGIN) == 1 and text.count(gf.END) == 1
    head, block = text.split(gf.BEGIN)
    block, tail = block.split(gf.END)
    expected = gf.sweep_rows(head + tail.lstrip("\n"))
    assert yaml.safe_load(block) == expected
    records = gf.sweep_records()
    assert len(records) == 249 + 598
    cited = []  # (log, record) of every M row
    for r in vv.load_table(vv.DEFAULT_TABLE):
        if r["type"] == "M":
            cited += gf.cited_records(r.get("source"))
    want = {gf.record_key(rec) for rec in records}
    assert sorted(c for c in cited if c in want) == sorted(want)


# ------------------------------------------------------------------------------- end to end

@pytest.fixture(scope="session")
def vspyre():
    try:
        b = vv.find_vspyre()
    except vv.ValidateError as e:
        pytest.skip(str(e))
    if not os.path.isfile(b):
        pytest.skip(f"no vspyre binary at {b}")
    return str(Path(b).resolve())


def test_end_to_end_two_rows(vspyre, tmp_path):
    t = tmp_path / "two.yaml"
    t.write_text(textwrap.dedent(f"""\
        schema: 1
        rows:
        - {{id: neg, section: 6a, type: M, measured_us: 77.97,
           fixture: {BUNDLES / 'neg_2048x1024_c32'}, source: hbm_ops log}}
        - {{id: add, section: 6a, type: M, measured_us: 106.80,
           fixture: tests/fixtures/bundles/add_2048x1024_c32, source: hbm_ops log}}
        - {{id: add_vs_neg, section: 6a, type: M-ratio, numerator: add, denominator: neg}}
        """))
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, str(SCRIPT), "--vspyre", vspyre, "--table", str(t),
                        "--json", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    for k in ("mape_percent", "max_error_percent", "spearman", "pearson", "rows"):
        assert k in res
    assert res["n_counted"] == 2 and not res["failed"]
    rows = {o["id"]: o for o in res["rows"]}
    for i in ("neg", "add"):
        o = rows[i]
        assert o["predicted"] > 0
        assert o["error_percent"] == pytest.approx(100 * (o["predicted"] - o["measured"]) / o["measured"])
    assert res["mape_percent"] == pytest.approx(
        (abs(rows["neg"]["error_percent"]) + abs(rows["add"]["error_percent"])) / 2)
    assert rows["add_vs_neg"]["predicted"] == pytest.approx(
        rows["add"]["predicted"] / rows["neg"]["predicted"])
    with open(out / "validation.csv", newline="") as f:
        assert [row["id"] for row in csv.DictReader(f)] == ["neg", "add", "add_vs_neg"]
    png = out / "validation.png"
    if png.exists():   # matplotlib present
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the text report
    r = subprocess.run([sys.executable, str(SCRIPT), "--vspyre", vspyre, "--table", str(t),
                        "--out", str(out), "-q", "--no-plot"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "MAPE" in r.stdout and "Spearman" in r.stdout and "add_vs_neg" in r.stdout
