"""CSV and TSV documents, and compressed (.gz, .zst) documents of every format: identity
reassembly, structure kept (quoting, other columns, row count), clear errors."""

from __future__ import annotations

import csv
import gzip
import io
import time
from pathlib import Path

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from producer import defaults
from producer.documents import DocumentError, ReadOptions, output_path, parse_text
from producer.files import plan_files, write_atomic
from producer.formats.table import header_of, scan
from producer.stored_layout import dump_document, load_document
from producer.streaming import StreamedDocument
from tests.test_documents import (
    EOL,
    assert_each_translation_once_in_order,
    assert_read_or_refused,
    identity,
    jsonl_documents,
    md_documents,
    read_whole,
    sentence_text,
    txt_documents,
)
from tests.test_inputs import read_input

DELIMITER = {"csv": ",", "tsv": "\t"}
OPTIONS = ReadOptions(columns=("text", "2"))
CELL_TEXT = st.one_of(sentence_text(), st.text(alphabet='ab ."\r\n\t,中', max_size=12))


@st.composite
def table_cells(draw, delimiter: str) -> str:
    """One raw cell: plain where it can be, else quoted (as RFC 4180 writers do), or quoted anyway."""
    value = draw(CELL_TEXT)
    needs_quotes = any(c in value for c in (delimiter, '"', "\r", "\n"))
    if needs_quotes or draw(st.booleans()):
        return '"' + value.replace('"', '""') + '"'
    return value


@st.composite
def table_documents(draw, fmt: str) -> str:
    delimiter, eol = DELIMITER[fmt], draw(EOL)
    header = delimiter.join(["id", "text", "note", "x"])
    rows = draw(st.lists(st.lists(table_cells(delimiter), min_size=1, max_size=5).map(delimiter.join)))
    return eol.join([header, *rows]) + draw(st.sampled_from(["", eol]))


def rows_of(text: str, fmt: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline=""), delimiter=DELIMITER[fmt]))


@settings(max_examples=150, deadline=None)
@given(st.data(), st.sampled_from(["csv", "tsv"]))
def test_table_identity(data, fmt):
    content = data.draw(table_documents(fmt))
    doc = parse_text(content, fmt, OPTIONS)
    assert identity(doc) == content
    assert load_document(dump_document(doc), "t").render([s.text for s in doc.segments]) == content
    assert_each_translation_once_in_order(doc)


@settings(max_examples=150, deadline=None)
@given(
    st.data(), st.sampled_from(["csv", "tsv"]), st.sampled_from(["你好，世界。", 'a "q", b', "x\ny", "\t;"])
)
def test_translated_tables_keep_rows_and_other_columns(data, fmt, translation):
    content = data.draw(table_documents(fmt))
    doc = parse_text(content, fmt, OPTIONS)
    out = doc.render([translation] * len(doc.segments))
    before, after = rows_of(content, fmt), rows_of(out, fmt)
    assert len(after) == len(before)
    for old, new in zip(before, after, strict=True):
        assert len(new) == len(old)
        assert [c for i, c in enumerate(new) if i not in (1, 2)] == [
            c for i, c in enumerate(old) if i not in (1, 2)
        ]
    stored = load_document(dump_document(doc), "t")
    assert stored.render([translation] * len(doc.segments)) == out


def test_only_the_columns_asked_for_change_and_quoting_is_kept():
    content = (
        'id,text,"note, kept"\r\n'
        '1,"Hello there. He said ""hi"".","Do not translate."\r\n'
        "2,Plain words here.,Nor this.\r\n"
        '3,"Two\nlines.",x\r\n'
        "4,,\r\n"
    )
    doc = parse_text(content, "csv", ReadOptions(columns=("text",)))
    assert [s.text for s in doc.segments] == [
        "Hello there.",
        'He said "hi".',
        "Plain words here.",
        "Two",
        "lines.",
    ]
    out = doc.render(["你好。", "他说“嗨”。", "一, 二", "两", "行"])
    assert out == (
        'id,text,"note, kept"\r\n'
        '1,"你好。他说“嗨”。","Do not translate."\r\n'
        '2,"一, 二",Nor this.\r\n'
        '3,"两\n行",x\r\n'
        "4,,\r\n"
    )
    untouched = doc.render([s.text for s in doc.segments[:2]] + ["一", "两", "行"])
    assert untouched.startswith('id,text,"note, kept"\r\n1,"Hello there. He said ""hi"".",')


def test_columns_by_name_or_index_and_tsv():
    content = "id\tbody\ttitle\n1\tGood morning.\tA title.\n"
    by_name = parse_text(content, "tsv", ReadOptions(columns=("title", "body")))
    by_index = parse_text(content, "tsv", ReadOptions(columns=("2", "1", "body")))
    assert (
        [s.text for s in by_name.segments]
        == [s.text for s in by_index.segments]
        == ["Good morning.", "A title."]
    )
    assert by_name.render(["早上好。", "标题"]) == "id\tbody\ttitle\n1\t早上好。\t标题\n"


def test_a_header_bom_does_not_hide_a_column_name():
    doc = parse_text("\ufefftext,n\nHi there.,1\n", "csv", ReadOptions(columns=("text",)))
    assert [s.text for s in doc.segments] == ["Hi there."]


def test_a_header_bom_before_a_quoted_name_does_not_hide_it_from_later_windows(tmp_path, monkeypatch):
    path = tmp_path / "t.csv"
    path.write_text(
        '\ufeff"text","a,b"\n' + "".join(f'"Row {i}.","{i}"\n' for i in range(8)), encoding="utf-8"
    )
    monkeypatch.setattr(defaults, "STREAM_WINDOW_BYTES", 40)
    windows = list(StreamedDocument(path, "csv", ReadOptions(columns=("text",))).windows())
    assert len(windows) > 1
    assert [s.text for w in windows for s in w.segments] == [f"Row {i}." for i in range(8)]
    assert header_of(path.read_text(encoding="utf-8"), ",", "t.csv") == ["text", "a,b"]


@pytest.mark.parametrize(
    ("content", "columns", "message"),
    [
        ("id,text\n1,x\n", ("body",), "t.csv: no column 'body'; its 2 columns are 'id', 'text'"),
        ("id,text\n1,x\n", ("5",), "t.csv: no column '5'; its 2 columns are 'id', 'text'"),
        ('id,text\n1,"open\n2,x\n', ("text",), "t.csv:2: a quoted cell is never closed"),
        ('id,text\n1,"a"b\n', ("text",), "t.csv:2: text after the closing quote"),
        (
            "id,text\n",
            (),
            "t.csv: a CSV document needs at least one column (--column, or columns in a schedule entry)",
        ),
        (
            "id,text,text\n1,x,y\n",
            ("text",),
            "t.csv: 2 columns are named 'text' (indexes 1, 2); name the ones to translate by their "
            "0-based index",
        ),
    ],
)
def test_table_errors_name_the_file(content, columns, message):
    with pytest.raises(DocumentError) as error:
        parse_text(content, "csv", ReadOptions(columns=columns), Path("t.csv"))
    assert str(error.value).startswith(message)


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_a_table_whose_lines_end_in_cr_alone_is_refused(tmp_path, fmt):
    """Only LF (or CRLF) ends a record, so such a file (Excel's "CSV (Macintosh)") was one
    record: its header, holding the column asked for, and no row to translate: written
    back unchanged, without a word."""
    delimiter = DELIMITER[fmt]
    content = "\r".join(delimiter.join(row) for row in [["id", "text"], ["1", "Hello there."], ["2", "Bye."]])
    with pytest.raises(DocumentError, match=rf"^t\.{fmt}:1: a carriage return outside quotes in the header"):
        parse_text(content + "\r", fmt, ReadOptions(columns=("text",)), Path(f"t.{fmt}"))
    path = tmp_path / f"t.{fmt}"
    path.write_text(content, encoding="utf-8", newline="")
    with pytest.raises(DocumentError, match="a carriage return outside quotes in the header"):
        list(StreamedDocument(path, fmt, ReadOptions(columns=("text",))).windows())
    quoted = f'id{delimiter}"te\rxt"\r\n1{delimiter}Hi there.\r\n'  # a quoted name may hold one
    assert [s.text for s in parse_text(quoted, fmt, ReadOptions(columns=("1",))).segments] == ["Hi there."]
    # lines ending in CR CR LF (csv.writer on a file opened in Windows text mode) are records
    doubled = f"id{delimiter}text{delimiter}note\r\r\n1{delimiter}Hi there.{delimiter}x\r\r\n"
    assert [s.text for s in parse_text(doubled, fmt, ReadOptions(columns=("text",))).segments] == [
        "Hi there."
    ]
    empty_first = f"id{delimiter}text\r{delimiter}Hi there.\r"  # a CR before a delimiter
    with pytest.raises(DocumentError, match="a carriage return outside quotes in the header"):
        parse_text(empty_first, fmt, ReadOptions(columns=("text",)))


def test_a_missing_column_of_a_wide_table_lists_its_first_names():
    header = ",".join(f"c{i}" for i in range(5000))
    with pytest.raises(DocumentError) as error:
        parse_text(header + "\n", "csv", ReadOptions(columns=("text",)), Path("t.csv"))
    listed = ", ".join(f"'c{i}'" for i in range(20))
    assert str(error.value) == f"t.csv: no column 'text'; its 5,000 columns are {listed} and 4,980 more"


def test_an_empty_table_has_nothing_to_translate():
    assert parse_text("", "csv", OPTIONS).segments == []


def scan_seconds(fmt: str, records: int) -> float:
    """The fastest of three scans of a one-column table of ``records`` records of 40 characters.

    The fastest, not the mean: a busy machine only ever slows a run down.
    """
    text = "text\n" + "a cell of forty characters no delimiter\n" * records
    fastest = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        assert sum(1 for _ in scan(text, DELIMITER[fmt], "t")) == records + 1
        fastest = min(fastest, time.perf_counter() - started)
    return fastest


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_a_window_of_many_short_one_cell_records_is_scanned_in_linear_time(fmt):
    # a record of one cell holds no delimiter: looking for one scanned on to the end of the
    # text at each record, quadratic. Eight times the records take about 8 times as long
    # now and took about 50 times as long then; a ratio, not a time, so a slow machine passes
    ratio = scan_seconds(fmt, 80_000) / scan_seconds(fmt, 10_000)
    assert ratio < 25, f"8 times the records took {ratio:.0f} times as long"


TABLE_LIKE = st.text(alphabet='",\t\r\n ab.中', max_size=200)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=300),
        TABLE_LIKE.map(lambda t: ("text,2,x\n" + t).encode()),
        table_documents("csv").map(str.encode),
    )
)
def test_fuzz_csv(tmp_path_factory, data):
    directory = tmp_path_factory.getbasetemp()
    assert_read_or_refused(directory, ".csv", data, columns=("text", "2"))
    assert_read_or_refused(directory, ".tsv", data, columns=("text", "2"))


# -- compression ------------------------------------------------------------------------

COMPRESS = {".gz": lambda data: gzip.compress(data, mtime=0), ".zst": zstandard.ZstdCompressor().compress}
DECOMPRESS = {
    ".gz": gzip.decompress,
    ".zst": lambda data: zstandard.ZstdDecompressor().decompressobj().decompress(data),
}


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from([".gz", ".zst"]),
    st.one_of(
        txt_documents().map(lambda t: (".txt", t)),
        md_documents().map(lambda t: (".md", t)),
        jsonl_documents().map(lambda t: (".jsonl", t)),
        table_documents("csv").map(lambda t: (".csv", t)),
        table_documents("tsv").map(lambda t: (".tsv", t)),
    ),
)
def test_compressed_documents_read_as_their_plain_text(tmp_path_factory, compression, document):
    suffix, content = document
    directory = tmp_path_factory.mktemp("compressed")
    options = ReadOptions(fields=("text",), columns=("text", "2"))
    plain, packed = directory / f"d{suffix}", directory / f"d{suffix}{compression}"
    plain.write_bytes(content.encode())
    packed.write_bytes(COMPRESS[compression](content.encode()))
    assert read_input(packed) == content.encode()
    expected, got = read_whole(plain, options), read_whole(packed, options)
    assert [s.text for s in got.segments] == [s.text for s in expected.segments]
    assert identity(got) == content


@pytest.mark.parametrize("compression", [".gz", ".zst"])
def test_outputs_are_compressed_like_their_input(tmp_path, compression):
    source = tmp_path / f"rows.csv{compression}"
    assert output_path(source) == tmp_path / f"rows.zh.csv{compression}"
    text = "id,text\n1,你好。\n" * 1000
    write_atomic(output_path(source), text)
    assert DECOMPRESS[compression](output_path(source).read_bytes()).decode() == text
    assert [p.name for p in tmp_path.iterdir()] == [f"rows.zh.csv{compression}"]  # no temporary left


def test_directories_find_compressed_documents_and_skip_their_translations(tmp_path):
    root = tmp_path / "in"
    root.mkdir()
    for name in ("a.csv.gz", "b.jsonl.zst", "c.txt", "a.zh.csv.gz", "d.gz", "e.csv.bz2"):
        (root / name).write_bytes(b"")
    planned = [(t.source.name, t.target.name) for t in plan_files([root], tmp_path / "out")]
    assert planned == [("a.csv.gz", "a.csv.gz"), ("b.jsonl.zst", "b.jsonl.zst"), ("c.txt", "c.txt")]


@pytest.mark.parametrize("compression", [".gz", ".zst"])
def test_a_corrupt_or_truncated_stream_names_the_file(tmp_path, compression):
    path = tmp_path / f"bad.txt{compression}"
    good = COMPRESS[compression](b"Hello there.\n" * 100)
    for data in (b"not compressed at all", good[: len(good) // 2]):
        path.write_bytes(data)
        with pytest.raises(DocumentError, match=f"bad.txt{compression}: not a valid {compression} stream"):
            read_input(path)
    path.write_bytes(b"")  # no frame at all, not even an empty one
    with pytest.raises(DocumentError, match=f"bad.txt{compression}: an empty file is not a valid"):
        read_input(path)
    path.write_bytes(COMPRESS[compression](b""))  # an empty text, compressed: valid
    assert read_input(path) == b""


def test_the_line_limit_counts_decompressed_bytes(tmp_path):
    line = tmp_path / "line.txt.zst"
    line.write_bytes(zstandard.ZstdCompressor().compress(b"x" * 5000))
    with pytest.raises(DocumentError, match="line.txt.zst:1: line longer than 1,000 bytes"):
        read_input(line, 1000)
