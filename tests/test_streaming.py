"""Streamed record files: windows render exactly what the whole document renders, in any
cut of the file, and a run's memory and output stay right."""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from producer import defaults
from producer.documents import DocumentError, ReadOptions, parse_text
from producer.files import FileTask
from producer.inputs import Limits
from producer.pipeline import RunOptions, RunReport, read_tasks, translate_files
from producer.streaming import StreamedDocument, is_streamed
from tests.test_documents import jsonl_documents, txt_documents
from tests.test_tables import table_documents

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
    monkeypatch.setattr(defaults, "STREAM_WINDOW_BYTES", window)
    monkeypatch.setattr(defaults, "READ_CHUNK_BYTES", piece)
    path = tmp_path_factory.mktemp("stream") / f"d.{fmt}{'.gz' if compressed else ''}"
    path.write_bytes(gzip.compress(content.encode()) if compressed else content.encode())
    whole = parse_text(content, fmt, OPTIONS)
    windows = list(StreamedDocument(path, fmt, OPTIONS).windows())
    assert [s.text for w in windows for s in w.segments] == [s.text for s in whole.segments]
    assert "".join(w.render([s.text for s in w.segments]) for w in windows) == content
    rendered = "".join(w.render([translated(s.text) for s in w.segments]) for w in windows)
    assert rendered == whole.render([translated(s.text) for s in whole.segments])


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
    assert len(translator.calls) > 5  # one call per window, not one per file
    assert report.sentences == len(whole.segments)


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


def test_which_formats_stream():
    assert is_streamed("csv", OPTIONS) and is_streamed("jsonl", OPTIONS) and is_streamed("txt", OPTIONS)
    assert not is_streamed("txt", ReadOptions(reflow=True)) and not is_streamed("md", OPTIONS)


def test_missing_options_fail_before_reading(tmp_path):
    report = RunReport()
    tasks = [FileTask(Path(tmp_path / "a.csv"), tmp_path / "a.zh.csv")]
    assert read_tasks(tasks, RunOptions(), report) == []
    assert report.errors == [f"{tmp_path / 'a.csv'}: a CSV document needs at least one column (--column)"]
