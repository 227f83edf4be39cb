"""Sentence splitting: pysbd behind guard rails, golden cases for pysbd's known failures."""

from __future__ import annotations

import time

import pysbd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from producer import defaults, segment
from producer.documents import parse_text
from producer.protect import protected_spans
from producer.pysbd_process import PysbdProcess
from producer.segment import fallback_split, needs_translation, split_sentences


def sentences(text: str) -> list[str]:
    return [text[start:end] for start, end in split_sentences(text)]


def assert_covers(text: str, spans: list[tuple[int, int]]) -> None:
    """Spans are in order, stripped, and only whitespace lies outside them: nothing lost."""
    position = 0
    for start, end in spans:
        assert position <= start < end
        assert not text[position:start].strip()
        assert text[start:end] == text[start:end].strip()
        position = end
    assert not text[position:].strip()


def pysbd_joins_back(text: str) -> bool:
    spans = pysbd.Segmenter(language="en", clean=False, char_span=True).segment(text)
    return "".join(span.sent for span in spans) == text


# -- pysbd's known failures -------------------------------------------------------------


@pytest.mark.parametrize("text", ["He said no.!!", "Hello,... !!?", "a.   .!?"])
def test_text_pysbd_drops_is_kept(text):
    # pysbd #57-style text loss: pysbd itself loses the trailing punctuation here
    assert not pysbd_joins_back(text)
    assert "".join(sentences(text)).replace(" ", "") == text.replace(" ", "")
    assert_covers(text, split_sentences(text))


@pytest.mark.parametrize("char", sorted(defaults.PYSBD_RESERVED_CHARS))
def test_pysbd_reserved_characters_survive(char):
    text = f"Press {char} to go on. Then press &{char}& to stop."
    assert sentences(text) == [f"Press {char} to go on.", f"Then press &{char}& to stop."]


def test_reserved_characters_do_lose_text_in_pysbd():
    assert not pysbd_joins_back("Hello ∯ world. Next ȸ one.")


def test_catastrophic_backtracking_input_completes():
    # pysbd #76/#79: NUMBERED_REFERENCE_REGEX backtracks exponentially on these
    reference = "[" + " ".join(["111"] * 40) + "]"
    text = f"See the list..{reference} Next sentence here."
    assert_covers(text, split_sentences(text))
    assert sentences(text)[-1].endswith("Next sentence here.")


def test_timeout_kills_a_runaway_pysbd_call_and_recovers():
    runaway = "See ..[" + " ".join(["111"] * 12) + "]"
    helper = PysbdProcess(timeout_s=0.5)
    try:
        assert helper.spans(runaway) is None
        assert helper.spans("One. Two.") == [(0, 5), (5, 9)]
    finally:
        helper.close()


def test_the_helper_never_imports_modules_from_the_working_directory(tmp_path, monkeypatch):
    # `python -m` puts the working directory first on sys.path: a pysbd.py or select.py
    # there would run in the helper and turn pysbd off
    for name in ("pysbd.py", "select.py", "json.py"):
        (tmp_path / name).write_text("raise ImportError('shadowed')\n")
    monkeypatch.chdir(tmp_path)
    helper = PysbdProcess()
    try:
        assert helper.spans("Dr. Smith arrived at 3 p.m. Then he left.") == [(0, 28), (28, 41)]
    finally:
        helper.close()


# -- golden splits ---------------------------------------------------------------------


def test_abbreviations():
    text = (
        "Dr. Smith lives in the U.S. now. He likes fruit, e.g. apples, i.e. sweet food. "
        "Smith et al. wrote it in 2020."
    )
    assert sentences(text) == [
        "Dr. Smith lives in the U.S. now.",
        "He likes fruit, e.g. apples, i.e. sweet food.",
        "Smith et al. wrote it in 2020.",
    ]


def test_decimals():
    text = "Pi is 3.14 roughly. The price rose 2.5 percent in Jan. 2020."
    assert sentences(text) == ["Pi is 3.14 roughly.", "The price rose 2.5 percent in Jan. 2020."]


def test_list_items():
    assert sentences("1. Buy milk. 2. Walk the dog. 3. Sleep.") == [
        "1. Buy milk.",
        "2. Walk the dog.",
        "3. Sleep.",
    ]


def test_single_sentence_and_blank():
    assert sentences("  Just one sentence without an end  ") == ["Just one sentence without an end"]
    assert split_sentences("   ") == []


def test_long_paragraph_is_cut_below_the_cap():
    text = " ".join([f"This is sentence number {i} of a long paragraph." for i in range(400)])
    spans = split_sentences(text)
    assert_covers(text, spans)
    assert len(spans) == 400
    words = "word " * 2000
    spans = split_sentences(words)
    assert_covers(words, spans)
    assert all(end - start <= defaults.PARAGRAPH_MAX_CHARS for start, end in spans)


def test_a_long_paragraph_is_cut_into_windows_once_for_its_sentences_and_its_cuts(monkeypatch):
    words = "word " * (defaults.PARAGRAPH_MAX_CHARS // 2)  # no sentence end: cut for length
    text = (words + "It ends here. " * 300 + words).strip()
    windows = segment._cuts
    calls = []
    monkeypatch.setattr(segment, "_cuts", lambda text, limit: calls.append(len(text)) or windows(text, limit))
    document = parse_text(text + "\n", "txt")
    assert calls == [len(text)]  # once: sentences and length cuts come from the same windows
    assert_covers(text, [(s.start, s.end) for s in document.segments])
    split = [s.text for s in document.segments if s.split]
    assert len(split) == 6 and all(piece.startswith("word") for piece in split)


def test_fallback_splitter():
    text = "Dr. Who met Mr. X. at 5. Then left! Did he? Yes. 好的。再见。"
    got = [text[s:e] for s, e in fallback_split(text)]
    assert got == ["Dr. Who met Mr. X. at 5.", "Then left!", "Did he?", "Yes.", "好的。", "再见。"]


@pytest.mark.parametrize("text", ["a" * 40000 + " B. C", "Ab. " * 10000 + "C", "x_1.e.g. Dr. " * 3000 + "Z"])
def test_fallback_splitter_takes_linear_time_on_a_long_paragraph(text):
    started = time.perf_counter()
    spans = fallback_split(text)
    assert time.perf_counter() - started < 0.5  # quadratic before: seconds for 40,000 characters
    assert_covers(text, spans)


def test_needs_translation():
    assert needs_translation("Hello")
    assert not needs_translation("3.14 -- 42!")
    assert not needs_translation("https://example.com/a-b")
    assert not needs_translation("me@example.com")
    assert needs_translation("中文")
    assert not needs_translation("<me@example.com>, a.b+c@x-y.example.org;")


def test_needs_translation_takes_linear_time_on_a_word_of_at_signs():
    started = time.perf_counter()
    assert needs_translation("a@" * 1500)
    assert needs_translation("a@" * 20000)
    assert not needs_translation("a@" * 20000 + "b.com")
    assert time.perf_counter() - started < 0.5  # cubic before: about ten seconds


@pytest.mark.parametrize("text", ["a." * 20000, "a" * 40000, "x+y-" * 10000 + "//", "/" * 40000 + "a"])
def test_needs_translation_takes_linear_time_on_a_long_word_of_scheme_characters(text):
    started = time.perf_counter()
    assert needs_translation(text)
    assert time.perf_counter() - started < 0.5  # quadratic before: about six seconds for "a." * 20000


def test_urls_are_found_where_a_word_starts():
    assert not needs_translation("(https://x.org/a) [www.x.org] <mailto:me@x.org> «git+ssh://x/y»")
    assert not needs_translation("(//cdn.example.com/x.js)")  # protocol-relative, as protect reads it
    assert needs_translation("a//b.com //home")


@pytest.mark.parametrize(
    "url",
    [
        "Https://x.org/a",
        "WWW.Example.COM",
        "//CDN.example.com/x.js",
        "MAILTO:a@b.org",
        "git+ssh://x/y",
        "ftp://it's@x.org",
    ],
)
def test_needs_translation_finds_a_url_where_protect_starts_one(url):
    """Both read a URL's start from one pattern (``producer.protect.URL_START``)."""
    text = f"See {url} now."
    assert [text[start:end] for start, end in protected_spans(text)] == [url]
    assert not needs_translation(url) and needs_translation(f"See {url}")


def test_a_line_that_is_only_a_url_address_or_domain_is_not_translated():
    content = "x.org\nhttps://x.org/a\n(a@b.com)\nexample.com:8080/x\ngit@github.com:u/r.git\nEmail:a@b.com\n"
    assert [s.text for s in parse_text(content, "txt").segments] == ["Email:"]  # a label is text


@pytest.mark.parametrize("text", ["a@b@c.com", "@john@example.com", "a@@b.com", "(a.b@c@d.example.org)"])
def test_an_address_with_more_than_one_at_sign_is_found_whole(text):
    assert not needs_translation(text)  # its first part, "a@", was left as words


def test_an_address_with_a_path_or_an_scp_like_remote_is_found_whole():
    assert not needs_translation("a@b.com/x")  # "/x" was left as a word, as protect read it
    assert not needs_translation("deploy@example.com:/srv/app")  # ":/srv/app" was left


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(list("ab .!?;:\"'()[]1\t∯ȸ中。") + ["Dr.", "e.g.", "U.S."])))
def test_split_never_loses_text(tokens):
    text = "".join(tokens)
    assert_covers(text, split_sentences(text))


@pytest.mark.parametrize(
    ("text", "expected"),
    [  # pySBD English Golden Rules that the guard rails used to break
        ("1) The first item 2) The second item", ["1) The first item", "2) The second item"]),
        ("⁃9. The first item ⁃10. The second item", ["⁃9. The first item", "⁃10. The second item"]),
        (
            "a) the first item b) the second item c) the third list item",
            ["a) the first item", "b) the second item", "c) the third list item"],
        ),
    ],
)
def test_golden_rules_of_lists_are_kept(text, expected):
    assert sentences(text) == expected
