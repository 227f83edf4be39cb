"""Quality flags on real sentences: human translations (Tatoeba) and the demo model's outputs.

The demo outputs below are what models/demo/bundle (int8) gave for these sentences; they are
kept as text so that a retrained demo model does not change what these tests check.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from producer import defaults
from producer.documents import parse_text
from producer.quality import FLAGS, FlagLog, flags, mostly_latin, number_strings
from producer.segment import split_paragraph, split_sentences

#: (source, human translation) pairs from ../shared/data/en-zh/cmn_hans.txt: nothing flagged.
HUMAN = [
    ("Hi.", "嗨。"),
    ("I have 3 cats.", "我有三只猫。"),
    ("I was born on May 13, 1990.", "我出生于1990年5月13日。"),
    ("This will cost about 10,000 yen.", "这将花费约10000日元。"),
    ("I'm going to study, study and study.", "我要学习，学习，再学习。"),
    ("Tom and Mary are looking at each other.", "汤姆和玛丽正看着对方。"),
    ("It's ２０１６ now.", "现在是2016年。"),
    # names written against the characters around them, numbers split by a full-width comma
    ("Use Kubernetes and PostgreSQL with Elasticsearch.", "使用Kubernetes和PostgreSQL与Elasticsearch。"),
    ("Scores were 45, 120 and 300.", "分数为45，120和300。"),
]

#: The demo model's capped output for a sentence of README.md: a loop, far too long.
LOOP_SOURCE = (
    "Each output is written atomically (temporary file, then rename), and an input is never overwritten."
)
LOOP_OUTPUT = (
    "大教室在沙滩上面面面面写的文件子,     直到他从来面前, 大王示示示示示示示示示示示示示示示信息息"
    "在意意意意意意意意大王王王星星星星星星星星星星星星星星星星星星星星星星星星星星星星"
)


@pytest.mark.parametrize(("source", "output"), HUMAN)
def test_good_human_translations_are_not_flagged(source: str, output: str) -> None:
    assert flags(source, output) == []


def test_length_cap_comes_from_the_decoder() -> None:
    assert flags("Hi.", "嗨。", hit_length_cap=True) == ["length_cap"]


def test_a_demo_loop_is_flagged_as_repeat_and_ratio() -> None:
    assert flags(LOOP_SOURCE, LOOP_OUTPUT, hit_length_cap=True) == ["length_cap", "repeat", "ratio"]


@pytest.mark.parametrize(
    "output",
    [
        "我父亲在晚饭前洗洗洗洗了澡。",  # demo, "My father took a bath before dinner."
        "文件文件被发现了, 是是是在他他还是会在成成成手术文章的的的的发现发现发现发现发现了",  # demo
        "只有 在 在 在 在",  # a loop with spaces between
        "the the the the end",  # an English loop
    ],
)
def test_repeat_finds_loops(output: str) -> None:
    assert "repeat" in flags("Some source sentence.", output)


@pytest.mark.parametrize(
    "output",
    [
        "哈哈哈，谢谢你。",  # three times is no loop yet (four times is)
        "我要研究研究。",
        "这花了1000000日元……………",  # digits and punctuation never make a loop
    ],
)
def test_repeat_leaves_reduplication_digits_and_punctuation(output: str) -> None:
    assert "repeat" not in flags("Some source sentence.", output)


@pytest.mark.parametrize(
    ("source", "output"),
    [
        ("Tom is 25 years old.", "汤姆是2年2年。"),  # demo
        ("The price rose from 1,200 to 3,400 dollars in 2016.", "价价111113美元。"),  # demo
        ("Lincoln was elected president in 1860.", "林肯在18888888年被选为总统。"),  # demo loop in digits
        ("We sold 1,500 copies in 2019.", "我们卖了1500本。"),  # a number lost
    ],
)
def test_digits_flags_changed_numbers(source: str, output: str) -> None:
    assert "digits" in flags(source, output)


def test_digits_rules() -> None:
    # Thousands separators and full-width digits do not matter; versions stay whole.
    assert number_strings("1,500 or １５００ in 2.13.0", english=True) == {"1500": 2, "2.13.0": 1}
    # Small whole numbers may be written in characters, or a word become digits.
    assert number_strings("3 cats, the 1st, 10 times", english=True) == {}
    # A month named in the source may come back as its number before 月.
    assert number_strings("12月25日", english=False, source="On December 25.") == {"25": 1}
    assert number_strings("12月25日", english=False, source="On the 12th day 25.") == {"12": 1, "25": 1}


def test_copied_means_the_output_is_still_english() -> None:
    # (words kept as they are count for neither length, so a copy is no ratio problem too)
    assert flags("See README.md for details.", "See README.md for details.") == ["copied"]
    assert flags("Run pip install now.", "Run pip install 现在。") == ["copied"]
    assert flags("Python 3.12 runs on Linux.", "Linux 上运行 Python 3.12。") == []
    assert flags("你好，世界。", "你好，世界。") == []  # a Chinese source passed through
    assert mostly_latin("OK") and not mostly_latin("好的") and not mostly_latin("2016")


def test_ratio_band_and_short_sources() -> None:
    source = "I can call Tom if you want, or Mary."  # 29 characters besides spaces
    assert flags(source, "我可以。") == ["ratio"]  # under 0.15: truncated
    assert flags(source, "如果你想要的话，我可以打电话给汤姆或玛丽。") == []
    too_long = "如果你想要的话，我可以打电话给汤姆或玛丽，然后我们可以一起去吃晚饭吧。"
    assert flags(source, too_long) == ["ratio"]  # over 0.8
    assert flags("Hi there, Tom.", "嗨") == []  # too short to judge
    assert defaults.RATIO_MIN_SOURCE_CHARS == 20


def long_paragraph(words: int) -> str:
    """A paragraph with no sentence end for more than PARAGRAPH_MAX_CHARS characters."""
    return " ".join(f"word{n}" for n in range(words)) + ". The end follows here."


def test_the_segmenter_reports_its_cuts_for_length() -> None:
    text = long_paragraph(400)
    assert len(text) > defaults.PARAGRAPH_MAX_CHARS
    sentences, cuts = split_paragraph(text)
    assert len(cuts) == 1 and text[cuts[0] - 1] == " "
    assert sentences == split_sentences(text)
    assert [text[s:e] for s, e in sentences][-1] == "The end follows here."
    assert split_paragraph("A short one. Another.").length_cuts == []


def test_split_sentences_are_flagged_and_kept_in_the_document() -> None:
    text = long_paragraph(400) + "\nA new line.\n"
    document = parse_text(text, "txt")
    split = [segment.split for segment in document.segments]
    assert split == [True, True, False, False]  # the two pieces of the cut sentence
    log = FlagLog(io.StringIO())
    log.check("long.txt", document, [segment.text for segment in document.segments], lambda i: False)
    log.keep()
    assert log.counts["split"] == 2
    assert log.counts["copied"] == 4  # the "translations" are the sources themselves


def test_flag_log_writes_records_with_lines_and_counts() -> None:
    text = "Hi.\n\nTom is 25 years old.\n" + LOOP_SOURCE + "\n"
    document = parse_text(text, "txt", path=Path("notes.txt"))
    outputs = ["嗨。", "汤姆是2年2年。", LOOP_OUTPUT]
    out = io.StringIO()
    log = FlagLog(out)
    log.check("notes.txt", document, outputs, lambda i: i == 2)
    log.keep()
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert records == [
        {
            "document": "notes.txt",
            "line": 3,
            "source": "Tom is 25 years old.",
            "output": outputs[1],
            "flags": ["digits"],
        },
        {
            "document": "notes.txt",
            "line": 4,
            "source": LOOP_SOURCE,
            "output": LOOP_OUTPUT,
            "flags": ["length_cap", "repeat", "ratio"],
        },
    ]
    assert log.summary() == "1 length_cap, 1 repeat, 1 digits, 1 ratio"
    assert set(log.counts) <= set(FLAGS)


def test_skipped_segments_are_not_checked() -> None:
    document = parse_text("Tom is 25 years old.\n", "txt")
    log = FlagLog()
    log.check("x.txt", document, ["汤姆是2年2年。"], lambda i: False, skip=lambda i: True)
    log.keep()
    assert log.summary() == ""


def test_a_documents_flags_wait_for_keep_and_drop_forgets_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(defaults, "PENDING_RECORDS_BYTES", 64)  # the records spill to a file
    document = parse_text("Tom is 25 years old.\nHe has 31 cats.\n", "txt")
    out = io.StringIO()
    log = FlagLog(out)
    log.check("failed.txt", document, ["汤姆是2岁。", "他有4只猫。"], lambda i: False)
    assert out.getvalue() == "" and log.summary() == ""  # pending until the document is written
    log.drop()  # it was not: nothing of it is counted or written
    log.keep()
    assert out.getvalue() == "" and log.summary() == ""
    for window in range(2):  # a document checked a window at a time, then written
        log.check(
            "kept.txt", document, ["汤姆是2岁。", "他有4只猫。"], lambda i: False, first_line=1 + 2 * window
        )
    log.keep()
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(r["document"], r["line"]) for r in records] == [("kept.txt", n) for n in (1, 2, 3, 4)]
    assert log.summary() == "4 digits"
