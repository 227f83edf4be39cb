import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli import main
from models.bundle import default_bundle_dir
from models.translator import Translator

EXPECTED = Path(__file__).resolve().parents[1] / "models" / "regression" / "demo_expected.tsv"
HAN = re.compile(r"[\u4e00-\u9fff]")

pytestmark = pytest.mark.skipif(
    not (default_bundle_dir() / "bundle.json").exists(), reason="demo bundle not built"
)


def _expected():
    floor, rows = None, []
    for line in EXPECTED.read_text(encoding="utf-8").splitlines():
        if line.startswith("# int8_exact_match_floor"):
            floor = float(line.split("\t")[1])
        elif not line.startswith("#"):
            rows.append(line.split("\t"))
    return floor, rows


@pytest.fixture(scope="module")
def demo():
    return Translator()


def test_demo_bundle_translates_dev_sentences_to_the_committed_outputs(demo):
    _, rows = _expected()
    assert len(rows) >= 40
    assert [demo.translate_one(en).text for en, _, _ in rows] == [int8 for _, _, int8 in rows]


def test_int8_agreement_with_fp32_stays_above_the_recorded_floor(demo):
    floor, rows = _expected()
    outputs = [demo.translate_one(en).text for en, _, _ in rows]
    exact = sum(out == fp32 for out, (_, fp32, _) in zip(outputs, rows, strict=True)) / len(rows)
    assert exact >= floor


def test_translate_without_model_gives_chinese(tmp_path):
    source = tmp_path / "notes.txt"
    source.write_text("I like cats.\nWhere is the station?\n\nThank you very much.\n")
    result = CliRunner().invoke(main, ["translate", str(source)])
    assert result.exit_code == 0, result.output
    lines = (tmp_path / "notes.zh.txt").read_text().split("\n")
    assert len(lines) == 5 and lines[2] == "" and lines[4] == ""
    assert all(HAN.search(line) for line in (lines[0], lines[1], lines[3]))
