"""Streamed files: windows render exactly what the whole document renders, in any cut of the
file (record files after a record, Markdown and --reflow text after a blank line outside any
block), and a run's memory and output stay right."""

from __future__ import annotations

import gzip
import io
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from producer import defaults
from producer.documents import Document, DocumentError, ReadOptions, parse_text, window_cuts
from producer.files import FileTask
from producer.inputs import Limits
from producer.pipeline import RunOptions, RunReport, read_tasks, translate_files
from producer.quality import FlagLog
from producer.streaming import StreamedDocument
from tests.test_cli_translate import MARKDOWN as GUIDE
from tests.test_documents import MARKDOWN, MARKDOWN_LIKE, jsonl_documents, md_documents, txt_documents
from tests.test_tables import table_documents

ROOT = Path(__file__).resolve().parent.parent

OPTIONS = ReadOptions(fields=("text", "meta.title"), columns=("text", "2"))


@dataclass(frozen=True)
class Result:
    text: str
    hit_length_cap: bool = False


def translated(text: str) -> str:
    return "译" + text[::-1]


class FakeTranslator:
    """A deterministic translator that records each call's sentences."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def translate(self, sentences):
        self.calls.append(list(sentences))
        return [Result(translated(s)) for s in sentences]


class CopyingTranslator(FakeTranslator):
    """Answers ``copied`` with itself (a flagged translation) and anything else in Chinese."""

    def __init__(self, copied: str) -> None:
        super().__init__()
        self.copied = copied

    def translate(self, sentences):
        self.calls.append(list(sentences))
        return [Result(s if s == self.copied else "好" * 2) for s in sentences]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.one_of(
        txt_documents().map(lambda t: ("txt", t)),
        jsonl_documents().map(lambda t: ("jsonl", t)),
        table_documents("csv").map(lambda t: ("csv", t)),
        table_documents("tsv").map(lambda t: ("tsv", t)),
    ),
    st.integers(min_value=1, max_value=80),
    st.integers(min_value=1, max_value=50),
    st.booleans(),
)
def test_windows_render_what_the_whole_document_renders(
    tmp_path_factory, monkeypatch, document, window, piece, compressed
):
    fmt, content = document
    path = written(tmp_path_factory, monkeypatch, fmt, content, window, piece, compressed)
    assert_windows_render_the_whole(path, fmt, OPTIONS, content)


def written(tmp_path_factory, monkeypatch, fmt, content, window, piece, compressed=False) -> Path:
    """``content`` written as a file of format ``fmt`` (gzipped if ``compressed``), read in
    pieces of ``piece`` bytes and windows of ``window``."""
    monkeypatch.setattr(defaults, "STREAM_WINDOW_BYTES", window)
    monkeypatch.setattr(defaults, "READ_CHUNK_BYTES", piece)
    path = tmp_path_factory.mktemp("stream") / f"d.{fmt}{'.gz' if compressed else ''}"
    path.write_bytes(gzip.compress(content.encode()) if compressed else content.encode())
    return path


def assert_windows_render_the_whole(
    path: Path, fmt: str, options: ReadOptions, content: str
) -> list[Document]:
    """The windows of ``path`` (holding ``content``) have the segments of the whole document,
    and render, joined, what it renders: its text, and its translation."""
    whole = parse_text(content, fmt, options)
    windows = list(StreamedDocument(path, fmt, options).windows())
    assert [s.text for w in windows for s in w.segments] == [s.text for s in whole.segments]
    assert "".join(w.render([s.text for s in w.segments]) for w in windows) == content
    rendered = "".join(w.render([translated(s.text) for s in w.segments]) for w in windows)
    assert rendered == whole.render([translated(s.text) for s in whole.segments])
    return windows


def windows_rendering_the_whole(
    tmp_path: Path,
    monkeypatch,
    content: str,
    window: int,
    fmt: str = "md",
    options: ReadOptions | None = None,
) -> list[Document]:
    """The windows of ``content``, written to a file and read ``window`` bytes at a time,
    checked by `assert_windows_render_the_whole`."""
    monkeypatch.setattr(defaults, "STREAM_WINDOW_BYTES", window)
    path = tmp_path / f"doc.{fmt}"
    path.write_text(content)
    return assert_windows_render_the_whole(path, fmt, options or ReadOptions(), content)


#: Lines of every kind the Markdown block scanner tells apart, blank lines included, so that
#: joined at random they open and close fences, HTML blocks, lists, quotes, tables, code and
#: front matter around the blank lines that windows are cut after.
MARKDOWN_LINES = st.sampled_from(
    [
        "",
        "",
        "  ",
        "\t",
        "\x0c",
        "Text one. Two.",
        "More *text. Here* and [a link. Two](http://a.b).",
        "Hello 中文. World https://x.org/a.",
        "\ufeffA BOM. Here.",
        "\ufeff",
        "# Title. Here. #",
        "Setext. Title.",
        "===",
        "- Item. Two.",
        "* [ ] Task. Item.",
        "1. First. Second.",
        "   - Nested item. Here.",
        "    - Deep item. Or code.",
        "      | Deep. Row | or code |",
        "  Continued. Text.",
        "    Indented. Code or text.",
        "      Deeper. Code.",
        "> Quote. Text.",
        "> > Nested. Quote.",
        ">",
        "```",
        "```python",
        "~~~",
        "  ```",
        "| Cell. One | `a|b` |",
        "|---|---:|",
        "<div>",
        "</div>",
        "<div>Inline. HTML.</div>",
        "<!-- A comment. Here.",
        "-->",
        "<pre>",
        "</pre>",
        "<?php echo 1; ?>",
        "---",
        "+++",
        "...",
        "title: Front. Matter.",
        "***",
        "[ref]: http://x.y",
        "[Note]: a|b",
        "[^1]: A note. Here.",
    ]
)


#: Blocks whose lines hold blank lines or go on across them, in the shapes the scanner reads.
MARKDOWN_BLOCKS = st.sampled_from(
    [
        ["- Item. One.", "", "    Same item. Text.", "", "      Code or text.", "", "Out. Of the list."],
        ["1. First.", "   - Nested. Item.", "", "     Nested text.", "", "  Back. Text."],
        ["```", "code. One.", "", "", "more. Code.", "```"],
        ["~~~ python", "", "code. Here.", "~~~~"],
        ["```", "an open fence. To the end.", ""],
        ["<!-- A comment.", "", "Still. Comment.", "-->"],
        ["<pre>", "", "pre. Text.", "</pre>"],
        ["<div>", "HTML. Block.", "", "After. HTML."],
        ["    code. One.", "", "", "    code. Two.", "", "Text. After."],
        ["| a. | b. |", "|---|---|", "| c. | d. |", "", "| e. |"],
        ["> Quote. One.", ">", "> Quote. Two.", "", "> Three."],
        ["- Item. One.", "  ```", "  code. In item.", "", "Out. Of the list."],
        ["> ```", "> code. In quote.", "", "After. Quote."],
        [">     code. In quote.", ">", ">     more. Code.", "> Text. Quote."],
        ["Intro. Text.", ">     code. In quote.", "> Quote. Text."],
        ["> - Item. Quoted.", "", "\tcode. After quote.", "", "> - Item. Quoted.", ">", ">   Same. Item."],
        ["---", "title: A. Title.", "", "more: x.", "---"],
        ["+++", "", "a = 1", "+++"],
        ["Setext. Title.", "---"],
        ["Hard. Wrapped", "paragraph. Goes", "on here."],
        ['[ref]: http://x.y "A title.', "Goes on. | Here.", ":-- | --", 'End."', "Text. After."],
        ["[ref]: http://x.y", "  'A title. On the next line.'", "Text. After."],
        ['[ref]: http://x.y "Open. Title.', "", "Text. After."],
        ["[ref]:", "  http://x.y 'A title.", "Goes on.'", "Text. After.", "[no]:", "", "/x. Text."],
        ["- <div>", "  HTML. In item.", "", "Out. Of the list.", "  <!-- A comment.", "", "-->"],
        ["> <div> HTML. Quoted.", "> more. HTML.", ">", "> Quote. Text.", "lazy. Text."],
        ["-     code. In item.", "      more. Code.", "    Text. In item.", "", "    More. Text."],
        ["- ", "", "  Text. After an empty item.", "", "    Code. After it.", "- ", "      Code. In it."],
        ["> Quote. Text.", "    lazy. Text.", "> > Deeper. Quote.", "> lazy. Again."],
        [
            "> - Item. Quoted.",
            ">   > Quote. In item.",
            ">   >",
            ">   >     code. Deep.",
            ">",
            ">   Item. Text again.",
            "",
            "> 1. - Deep. Item.",
            ">",
            ">      Deep. Text.",
        ],
        [
            "- One. Item.",
            "  - Two. Item.",
            "    - Three. Item.",
            "",
            "          code. Deep.",
            "",
            "      Two. Text.",
            "- ",
            "",
            "  > - ```",
            "  >   fenced. Deep.",
            "",
            "Out. Text.",
        ],
        [
            "- > ```",
            "  > code. In a quote in an item.",
            "",
            "1. - <div>",
            "     HTML. Here.",
            "- >     code.",
        ],
        [
            "  - > ```",
            "    > code. In an item's quote.",
            "",
            "1.  Item. Text.",
            "",
            "    >     code. Quoted.",
        ],
        [
            "Intro. Text.",
            "> [d]: /x 'A",
            "> title'",
            "- [e]: /y",
            "  More. Text.",
            "10. Item. Text.",
            "",
            "    [f]: /z",
        ],
    ]
)


@st.composite
def markdown_lines(draw) -> str:
    """Markdown made of ``MARKDOWN_LINES`` and ``MARKDOWN_BLOCKS`` joined by LF or CRLF, with
    or without a BOM, front matter (closed or not) and a final line ending."""
    front = draw(
        st.sampled_from([[], [], ["---", "a: 1", "", "b: 2", "---"], ["+++", "", "a = 1"], ["---", ""]])
    )
    pieces = draw(st.lists(st.one_of(MARKDOWN_LINES.map(lambda line: [line]), MARKDOWN_BLOCKS), max_size=20))
    lines = front + [line for piece in pieces for line in [*piece, *[""] * draw(st.integers(0, 2))]]
    eols = draw(st.lists(st.sampled_from(["\n", "\r\n"]), min_size=len(lines), max_size=len(lines)))
    text = "".join(line + eol for line, eol in zip(lines, eols, strict=True))
    if lines and draw(st.booleans()):
        text = text[: -len(eols[-1])]
    return draw(st.sampled_from(["", "\ufeff"])) + text


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.one_of(
        markdown_lines().map(lambda t: ("md", t)),
        markdown_lines().map(lambda t: ("md", t)),
        markdown_lines().map(lambda t: ("md", t)),
        md_documents().map(lambda t: ("md", t)),
        MARKDOWN_LIKE.map(lambda t: ("md", t)),
        txt_documents().map(lambda t: ("txt", t)),
        markdown_lines().map(lambda t: ("txt", t)),
    ),
    st.integers(min_value=1, max_value=80),
    st.integers(min_value=1, max_value=50),
    st.integers(min_value=4, max_value=200),
    st.booleans(),
)
def test_markdown_and_reflow_windows_render_what_the_whole_document_renders(
    tmp_path_factory, monkeypatch, document, window, piece, front_matter, compressed
):
    fmt, content = document
    monkeypatch.setattr(defaults, "FRONT_MATTER_MAX_CHARS", front_matter)
    path = written(tmp_path_factory, monkeypatch, fmt, content, window, piece, compressed)
    assert_windows_render_the_whole(path, fmt, ReadOptions(reflow=True), content)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.one_of(markdown_lines().map(lambda t: ("md", t)), markdown_lines().map(lambda t: ("txt", t))),
    st.integers(min_value=1, max_value=80),
    st.integers(min_value=1, max_value=50),
    st.integers(min_value=1, max_value=120),
)
def test_the_block_limit_refuses_the_first_block_longer_than_it_whatever_the_windows(
    tmp_path_factory, monkeypatch, document, window, piece, limit
):
    fmt, content = document
    path = written(tmp_path_factory, monkeypatch, fmt, content, window, piece)
    ends = [end for end, _ in window_cuts(content, fmt)]
    stretches = zip([0, *ends], [*ends, len(content)], strict=True)
    too_long = [start for start, end in stretches if len(content[start:end].encode()) > limit]
    options = ReadOptions(reflow=True, limits=Limits(block_bytes=limit))
    if not too_long:
        assert_windows_render_the_whole(path, fmt, options, content)
        return
    line = content.count("\n", 0, too_long[0]) + 1
    with pytest.raises(DocumentError, match=rf"d\.{fmt}:{line}: .* longer than {limit} bytes"):
        list(StreamedDocument(path, fmt, options).windows())


FIXTURES = [
    ROOT / "README.md",
    ROOT / "tests" / "data" / "jekyll_post.md",
    *sorted((ROOT / "bench").rglob("*.md")),
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "models" / "demo").glob("*.md")),
]


@pytest.mark.parametrize("window", [1, 200, 4096])
@pytest.mark.parametrize("source", FIXTURES + ["MARKDOWN", "GUIDE"], ids=str)
def test_the_repository_s_markdown_windows_render_what_the_whole_renders(
    tmp_path, monkeypatch, source, window
):
    content = {"MARKDOWN": MARKDOWN, "GUIDE": GUIDE}.get(str(source)) or Path(source).read_text()
    windows = windows_rendering_the_whole(tmp_path, monkeypatch, content, window)
    assert window > 1 or len(windows) > content.count("\n\n") // 4  # cut after many blank lines


def test_a_window_at_a_table_row_after_a_paragraph_knows_a_definition_cannot_start_there(
    tmp_path, monkeypatch
):
    content = "Para one.\n[a]: x|y\n|---|---|\n| c | d |\n"  # a table header, not a definition
    windows = windows_rendering_the_whole(tmp_path, monkeypatch, content, 1)
    assert len(windows) > 1


def test_a_window_in_nested_containers_starts_with_them_open(tmp_path, monkeypatch):
    content = (
        "> - Item.\n>\n>     Same item.\n>\n>         make install\n>\n"
        "> 1. - Deep.\n>\n>        Deep text.\n>\n>           make\n"
    )
    windows = windows_rendering_the_whole(tmp_path, monkeypatch, content, 1)
    assert len(windows) > 4
    assert [s.text for w in windows for s in w.segments] == ["Item.", "Same item.", "Deep.", "Deep text."]


@pytest.mark.parametrize("window", [1, 500])
def test_a_reflowed_text_s_windows_render_what_the_whole_renders(tmp_path, monkeypatch, window):
    content = (ROOT / "tests" / "data" / "gutenberg_footer.txt").read_text() * 3
    windows = windows_rendering_the_whole(
        tmp_path, monkeypatch, content, window, "txt", ReadOptions(reflow=True)
    )
    assert len(windows) > 3


def test_markdown_windows_start_only_where_no_block_is_open(tmp_path, monkeypatch):
    """Every blank line inside a block is passed; each window starts where the whole
    document's scanner is outside any block (after a blank line, or at a heading, list item
    or table row), with the list a blank line does not end, and never between a table's
    header and delimiter row."""
    content = (
        "---\ntitle: x\n\nmore: y\n---\n\n"  # front matter with a blank line
        "```\ncode\n\nmore code\n```\n\n"  # a fence
        "<!-- note\n\nstill a note -->\n\n"  # an HTML comment
        "- Item one.\n\n    Still item one.\n\n"  # a list item's second paragraph, not code
        "Paragraph one.\nSame paragraph.\n\n"  # ends the list
        "    code block\n\n    more code\n\n"
        "| a | b |\n|---|---|\n| c | d |\n"
        "# Heading\n- Item two\ngoes on.\n- Item three.\n"
    )
    windows = windows_rendering_the_whole(tmp_path, monkeypatch, content, 1)
    starts = [window.render([s.text for s in window.segments]).split("\n")[0] for window in windows]
    assert starts == [
        "---",
        "```",
        "<!-- note",
        "- Item one.",
        "    Still item one.",
        "Paragraph one.",
        "    code block",
        "    more code",  # indented code ends at a blank line (more after it is laid out alike)
        "| a | b |",
        "| c | d |",
        "# Heading",
        "- Item two",
        "- Item three.",
    ]
    assert [s.text for w in windows for s in w.segments] == [
        "Item one.",
        "Still item one.",
        "Paragraph one.",
        "Same paragraph.",
        "a",
        "b",
        "c",
        "d",
        "Heading",
        "Item two goes on.",
        "Item three.",
    ]


def test_a_translate_run_streams_windows_each_in_one_call(tmp_path, monkeypatch):
    monkeypatch.setattr(defaults, "STREAM_WINDOW_BYTES", 200)
    monkeypatch.setattr(defaults, "TRANSLATION_MEMORY_ENTRIES", 5)
    rows = "".join(f'{i},"Row {i} says hello. Row {i % 3} is here.",x\r\n' for i in range(40))
    source = tmp_path / "rows.csv.gz"
    source.write_bytes(gzip.compress(("id,text,n\r\n" + rows).encode()))
    target = tmp_path / "rows.zh.csv.gz"
    report, translator = RunReport(), FakeTranslator()
    options = RunOptions(read=OPTIONS)
    documents = read_tasks([FileTask(source, target)], options, report)
    assert isinstance(documents[0][1], StreamedDocument)
    translate_files(documents, translator, report)
    assert report.written == [target] and not report.errors
    whole = parse_text(gzip.decompress(source.read_bytes()).decode(), "csv", OPTIONS)
    assert gzip.decompress(target.read_bytes()).decode() == whole.render(
        [translated(s.text) for s in whole.segments]
    )
    assert report.sentences == len(whole.segments)
    # one call per window, not one per file nor several per window: each call holds its
    # window's distinct sentences in order, less only those sent before (remembered)
    windows = [
        [s.text for s in window.segments] for window in StreamedDocument(source, "csv", OPTIONS).windows()
    ]
    assert len(windows) > 5 and len(translator.calls) == len(windows)
    sent: set[str] = set()
    for call, window in zip(translator.calls, windows, strict=True):
        distinct = list(dict.fromkeys(window))
        assert call == [text for text in distinct if text in call]
        assert {text for text in distinct if text not in call} <= sent
        assert {text for text in distinct if "says hello" in text} <= set(call)  # never seen before
        sent.update(call)


def test_a_bad_record_part_way_fails_its_file_alone_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(defaults, "STREAM_WINDOW_BYTES", 100)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join('{"text": "Hello there."}\n' for _ in range(30)) + "{oops\n")
    good = tmp_path / "good.txt"
    good.write_text("Fine words.\n")
    tasks = [FileTask(bad, tmp_path / "bad.zh.jsonl"), FileTask(good, tmp_path / "good.zh.txt")]
    report = RunReport()
    translate_files(read_tasks(tasks, RunOptions(read=OPTIONS), report), FakeTranslator(), report)
    assert report.errors == [f"{bad}:31:2: invalid JSON: Expecting property name enclosed in double quotes"]
    assert report.written == [tmp_path / "good.zh.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "good.txt", "good.zh.txt"]


def test_a_table_record_longer_than_the_line_limit_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(defaults, "STREAM_WINDOW_BYTES", 50)
    monkeypatch.setattr(defaults, "READ_CHUNK_BYTES", 16)
    path = tmp_path / "t.csv"
    path.write_text('id,text\n1,"' + "line\n" * 100 + '"\n')
    options = ReadOptions(columns=("text",), limits=Limits(line_bytes=200))
    with pytest.raises(DocumentError, match="t.csv:2: record longer than 200 bytes"):
        list(StreamedDocument(path, "csv", options).windows())


def test_a_table_record_is_measured_in_bytes(tmp_path, monkeypatch):
    """The limit is in bytes, as for a line: a record of about 350 bytes in 150 characters of
    Chinese passed a limit of 200 bytes, measured in characters."""
    monkeypatch.setattr(defaults, "STREAM_WINDOW_BYTES", 50)
    monkeypatch.setattr(defaults, "READ_CHUNK_BYTES", 16)
    path = tmp_path / "t.csv"
    path.write_text('id,text\n1,"' + "中文\n" * 50 + '"\n2,ok\n', encoding="utf-8")
    options = ReadOptions(columns=("text",), limits=Limits(line_bytes=200))
    with pytest.raises(DocumentError, match="t.csv:2: record longer than 200 bytes"):
        list(StreamedDocument(path, "csv", options).windows())
    path.write_text('id,text\n1,"' + "中文\n" * 25 + '"\n2,ok\n', encoding="utf-8")  # 180 bytes
    assert len(list(StreamedDocument(path, "csv", options).windows())) > 1


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (
            "fence.md",
            "Intro. Here.\n\n```\n" + "code line\n\n" * 50 + "```\n",
            "fence.md:3: Markdown block longer than 300 bytes",
        ),
        (
            "para.txt",
            "Intro. Here.\n\n" + "words and more words\n" * 50,
            "para.txt:3: paragraph longer than 300 bytes \\(TRANSQUEUE_MAX_BLOCK_BYTES\\)",
        ),
    ],
)
def test_a_block_longer_than_the_block_limit_is_refused_naming_its_line(
    tmp_path, monkeypatch, name, content, message
):
    monkeypatch.setattr(defaults, "STREAM_WINDOW_BYTES", 10)
    monkeypatch.setattr(defaults, "READ_CHUNK_BYTES", 16)
    path = tmp_path / name
    path.write_text(content)
    options = ReadOptions(reflow=True, limits=Limits(block_bytes=300))
    with pytest.raises(DocumentError, match=message):
        list(StreamedDocument(path, path.suffix[1:], options).windows())
    windows = list(StreamedDocument(path, path.suffix[1:], ReadOptions(reflow=True)).windows())
    assert "".join(w.render([s.text for s in w.segments]) for w in windows) == content


def test_errors_and_flags_name_their_line_in_any_window(tmp_path, monkeypatch):
    monkeypatch.setattr(defaults, "STREAM_WINDOW_BYTES", 30)
    path = tmp_path / "d.md"
    path.write_bytes(b"# Title\n\n" + b"Some text. Here.\n\n" * 20 + b"```\nbad \xff\n```\n")
    with pytest.raises(DocumentError, match=r"d\.md:44: not valid UTF-8"):
        list(StreamedDocument(path, "md", ReadOptions()).windows())
    path.write_text("# Title\n\n" + "Some text. Here.\n\n" * 20 + "Flag me.\n")
    report = RunReport(quality=FlagLog(io.StringIO()))
    copies = CopyingTranslator("Flag me.")
    translate_files(read_tasks([FileTask(path, tmp_path / "out.md")], RunOptions(), report), copies, report)
    assert len(copies.calls) > 5  # windows
    flagged = [json.loads(line) for line in report.quality.out.getvalue().splitlines()]
    assert [(record["line"], record["source"], record["flags"]) for record in flagged] == [
        (43, "Flag me.", ["copied"])
    ]


def test_missing_options_fail_before_reading(tmp_path):
    report = RunReport()
    tasks = [FileTask(Path(tmp_path / "a.csv"), tmp_path / "a.zh.csv")]
    assert read_tasks(tasks, RunOptions(), report) == []
    assert report.errors == [
        f"{tmp_path / 'a.csv'}: a CSV document needs at least one column "
        "(--column, or columns in a schedule entry)"
    ]
