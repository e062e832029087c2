"""scripts/gen_bundle.py reproduces every generated fixture byte for byte.

Each generated fixture's README.md records the command that made it; running that command's
parameters through the generator again must give the same bundle.mlir and sdsc_*.json (the
README itself is not compared: bench/validation/gen_fixtures.py writes its own Mirrors line).
This catches a generator change that would silently alter committed fixtures (and with them the
validation baselines), and checks that parameters added later (binary `broadcast`, unary
`back_gap`) are optional: fixtures written before them regenerate unchanged.
"""
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import gen_bundle  # noqa: E402

FIXTURE_ROOTS = [ROOT / "tests" / "fixtures" / "bundles", ROOT / "tests" / "fixtures" / "sweep"]


def generated_fixtures():
    out = []
    for root in FIXTURE_ROOTS:
        for readme in sorted(root.glob("*/README.md")):
            for line in readme.read_text().splitlines():
                if line.startswith("python3 scripts/gen_bundle.py "):
                    out.append((readme.parent, line))
                    break
    return out


FIXTURES = generated_fixtures()


def test_there_are_generated_fixtures():
    # 23 presets and the other generated bundles, 116 sweep fixtures (none captured).
    assert len(FIXTURES) >= 200
    names = {d.name for d, _ in FIXTURES}
    assert "neg_backgap_256x192_c6" in names and "softmax_512x1024_baseline" in names


@pytest.mark.parametrize("fixture,command", FIXTURES, ids=[d.name for d, _ in FIXTURES])
def test_fixture_regenerates_byte_identical(tmp_path, fixture, command):
    words = shlex.split(command.split("  # or:")[0])
    assert words[:2] == ["python3", "scripts/gen_bundle.py"]
    name, outdir, rest = words[2], words[3], words[4:]
    assert Path(outdir) == fixture.relative_to(ROOT)
    overrides = {}
    while rest:
        assert rest[0] == "-p" and len(rest) >= 2, f"unexpected arguments {rest}"
        k, v = rest[1].split("=", 1)
        overrides[k] = gen_bundle.parse_value(v)
        rest = rest[2:]
    out = tmp_path / fixture.name
    gen_bundle.generate(name, str(out), overrides, command=command)
    want = sorted(p.name for p in fixture.iterdir() if p.name != "README.md")
    got = sorted(p.name for p in out.iterdir() if p.name != "README.md")
    assert got == want
    assert "bundle.mlir" in want and "sdsc_0.json" in want
    for f in want:
        assert (out / f).read_bytes() == (fixture / f).read_bytes(), f"{fixture.name}/{f} differs"


def test_bundles_for_a_what_if_card_with_more_cores(tmp_path):
    # The generator stopped at the Spyre card's 32 cores, so configs/whatif/cores_64.yaml could run
    # no 64-core kernel; the card's own limit is checked when a bundle runs.
    out = tmp_path / "neg64"
    gen_bundle.generate("unary", str(out), {"split": "mb=64"})
    import json
    sdsc = json.loads((out / "sdsc_0.json").read_text())
    op = next(iter(next(iter(sdsc.values()))["dscs_"][0].values()))
    assert op["numCoresUsed_"] == 64
    with pytest.raises(gen_bundle.GenError, match="1025 cores"):
        gen_bundle.generate("unary", str(tmp_path / "too_many"), {"split": "mb=1025"})
