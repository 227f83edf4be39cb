"""producer.jobs: sources, planning slots, rendering from the store."""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import pytest

from producer import layout
from producer.documents import DocumentError, ReadOptions, parse_text
from producer.files import FileTask, plan_files
from producer.inputs import Limits
from producer.jobs import (
    Source,
    file_source,
    file_sources,
    parse_source,
    plan_job,
    render_document,
    stdin_sources,
)
from producer.pipeline import stream_units
from producer.stored_layout import load_document
from store.config import Settings
from store.jobstore import DeadLetter, DocumentRecord, JobKeys, JobStore, NewJob

pytest_plugins = ["distributed_support"]

TEXT = "Hello there. How are you?\n\nHello there. Fine.\n"


def test_exactly_equal_sentences_share_one_slot_across_documents():
    options = ReadOptions()
    decomposed = unicodedata.normalize("NFD", "Café time.\n")
    sources = [
        Source("a.txt", "txt", TEXT),
        Source("b.txt", "txt", "Fine.\nCafé time.\n"),
        Source("c.txt", "txt", decomposed),
    ]
    plan = plan_job([(s, parse_source(s, options)) for s in sources], options)
    # The NFD spelling is a sentence of its own, as in `transqueue translate`'s memory.
    assert plan.sentences == ["Hello there.", "How are you?", "Fine.", "Café time.", decomposed.strip()]
    assert [d.slots for d in plan.documents] == [(0, 1, 0, 2), (2, 3), (4,)]
    stored = [load_document(layout, "x") for layout in plan.layouts]
    assert [d.render([seg.text for seg in d.segments]) for d in stored] == [s.text for s in sources]


def test_stdin_units_become_documents_read_as_translate_reads_them():
    data = b'{"t": "One. Two."}\r\n\n{"t": "Three."}\n{"u": 1}'
    options = ReadOptions(fields=("t",))
    sources = stdin_sources(stream_units(iter(data.splitlines(keepends=True))), options.fields)
    assert [s.text for s in sources] == ['{"t": "One. Two."}\r\n', "\n", '{"t": "Three."}\n', '{"u": 1}']
    assert [(s.name, s.fmt, s.first_line) for s in sources][2] == ("<stdin>", "jsonl", 3)
    assert [[seg.text for seg in parse_source(s, options).segments] for s in sources] == [
        ["One.", "Two."],
        [],
        ["Three."],
        [],
    ]
    assert stdin_sources([(1, "Hi.\n")], ())[0].fmt == "txt"


def test_stdin_errors_name_line_and_column():
    bad = stdin_sources([(1, '{"t": "a"}\n'), (2, '{"t": \n')], ("t",))[1]
    with pytest.raises(DocumentError, match=r"<stdin>:2:\d+: invalid JSON"):
        parse_source(bad, ReadOptions(fields=("t",)))


def test_file_sources_keep_targets_and_refuse_collisions(tmp_path):
    for name in ("a/x.txt", "b/x.txt", "c/y.md"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(b"Hi.\r\n")
    out, options, errors = tmp_path / "out", ReadOptions(), []
    parsed = file_sources(plan_files([tmp_path / "a/x.txt", tmp_path / "c"], out), out, options, errors)
    assert [(s.fmt, s.text, s.target) for s, _ in parsed] == [
        ("txt", "Hi.\r\n", "x.zh.txt"),
        ("md", "Hi.\r\n", "y.md"),
    ]
    assert [[seg.text for seg in doc.segments] for _, doc in parsed] == [["Hi."], ["Hi."]] and not errors
    with pytest.raises(DocumentError, match="would both be written to"):
        file_sources(plan_files([tmp_path / "a/x.txt", tmp_path / "b/x.txt"], out), out, options, errors)


def test_file_sources_report_each_bad_file_and_keep_the_others(tmp_path, monkeypatch):
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "good.txt").write_text("Hello there.\n")
    (inputs / "bad.txt").write_bytes(b"fine\n\xff\n")
    (inputs / "long.md").write_text("x" * 40 + "\n")
    (inputs / "odd.jsonl").write_text('{"text": 5}\n')
    os.mkfifo(inputs / "pipe.txt")
    monkeypatch.chdir(tmp_path)  # named relatively, reported as the job names them: absolute
    out, errors = tmp_path / "out", []
    options = ReadOptions(fields=("text",), limits=Limits(line_bytes=32))
    parsed = file_sources(plan_files([Path("in")], out), out, options, errors)
    assert [(source.name, source.target) for source, _ in parsed] == [(str(inputs / "good.txt"), "good.txt")]
    assert errors == [
        f"{inputs / 'bad.txt'}:2: not valid UTF-8 (invalid start byte)",
        f"{inputs / 'long.md'}:1: line longer than 32 bytes (TRANSQUEUE_MAX_LINE_BYTES)",
        f"{inputs / 'odd.jsonl'}:1:10: field 'text' holds int, not a string",
        f"{inputs / 'pipe.txt'}: not a regular file (a FIFO); not read",
    ]


def test_invalid_utf8_names_the_line(tmp_path):
    task = FileTask(tmp_path / "in.txt", tmp_path / "out" / "in.zh.txt")
    with pytest.raises(DocumentError, match="in.txt:2: not valid UTF-8"):
        file_source(task, tmp_path / "out", b"ok\n\xff\n")


def store_job(redis_server, text: str = TEXT) -> JobStore:
    """A job "j" of one document a.txt holding `text`, stored without queueing chunks."""
    redis_server.client().flushdb()
    store = JobStore.from_settings(Settings(redis_url=redis_server.url))
    options = ReadOptions()
    source = Source("a.txt", "txt", text)
    plan = plan_job([(source, parse_source(source, options))], options)
    store.create(
        NewJob(
            job_id="j",
            documents=plan.documents,
            layouts=plan.layouts,
            total=len(plan.sentences),
            chunks=1,
            out="",
            origin="files",
        )
    )
    return store


def test_render_waits_for_every_sentence_and_keeps_dead_ones_in_english(redis_server):
    store = store_job(redis_server)
    options = ReadOptions()
    assert render_document(store, "j", 0).text is None
    store.record("j", 0, "Hello there.", "你好。", fingerprint="f", hit=False)
    store.record("j", 1, "How are you?", "你好吗？", fingerprint="f", hit=False)
    assert render_document(store, "j", 0).text is None
    letter = DeadLetter(slot=2, text="Fine.", reason="boom", chunk=0, deliveries=1, at=0.0)
    store.dead_letter("j", letter)
    rendered = render_document(store, "j", 0)
    doc = parse_text(TEXT, "txt", options, Path("a.txt"))
    assert rendered.text == doc.render(["你好。", "你好吗？", "你好。", "Fine."])
    assert rendered.dead == (letter,)


def test_render_uses_the_segments_of_submit_time(redis_server, monkeypatch):
    store = store_job(redis_server, "First one. Second one.\n")
    store.record("j", 0, "First one.", "一。", fingerprint="f", hit=False)
    store.record("j", 1, "Second one.", "二。", fingerprint="f", hit=False)
    monkeypatch.setattr(layout, "split_sentences", lambda text: [(0, len(text))])
    assert render_document(store, "j", 0).text == "一。二。\n"


def test_stored_segments_that_do_not_match_the_slots_name_the_document(redis_server):
    store = store_job(redis_server, "First one. Second one.\n")
    for slot, text in enumerate(("一。", "二。")):
        store.record("j", slot, "x", text, fingerprint="f", hit=False)
    store.client.hset(JobKeys("j").docs, "0", DocumentRecord("a.txt", "txt", (0,)).to_json())
    with pytest.raises(DocumentError, match="a.txt: 2 stored segments but 1 slots"):
        render_document(store, "j", 0)
