"""producer.jobs: sources, storing a job window by window, rendering from the store."""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import pytest

from producer import defaults, layout
from producer.documents import DocumentError, ReadOptions, parse_text
from producer.files import plan_files
from producer.inputs import Limits
from producer.jobs import JobBuilder, Source, add_files, iter_documents, stdin_sources
from producer.pipeline import stream_units
from producer.stored_layout import load_document
from producer.streaming import StreamedDocument
from store.config import Settings
from store.jobstore import DeadLetter, DocumentRecord, JobKeys, JobStore, MissingRecord, WindowRecord

pytest_plugins = ["distributed_support"]

TEXT = "Hello there. How are you?\n\nHello there. Fine.\n"


@pytest.fixture
def store(redis_server):
    redis_server.client().flushdb()
    return JobStore.from_settings(Settings(redis_url=redis_server.url, chunk_size=2))


def text_source(name: str, text: str) -> Source:
    return Source(name, target=name, text=text, fmt="txt")


def windows_of(store: JobStore, job_id: str, n: int) -> list[WindowRecord]:
    return [store.window(job_id, n, w) for w in range(store.document(job_id, n).windows)]


def sent_sentences(store: JobStore, job: JobBuilder) -> list[str]:
    """The job's stored chunks' sentences, by slot."""
    pairs = sorted(pair for _, items in store.chunks(job.job_id, job.chunker.chunks) for pair in items)
    assert [slot for slot, _ in pairs] == list(range(job.total))  # every slot travels once
    return [text for _, text in pairs]


def test_exactly_equal_sentences_share_one_slot_across_documents(store):
    decomposed = unicodedata.normalize("NFD", "Café time.\n")
    sources = [
        text_source("a.txt", TEXT),
        text_source("b.txt", "Fine.\nCafé time.\n"),
        text_source("c.txt", decomposed),
    ]
    job = JobBuilder(store, ReadOptions())
    for source in sources:
        job.add(source)
    job.submit(out="", origin="files")
    # The NFD spelling is a sentence of its own, as in `transqueue translate`'s memory.
    assert sent_sentences(store, job) == [
        "Hello there.",
        "How are you?",
        "Fine.",
        "Café time.",
        decomposed.strip(),
    ]
    assert [windows_of(store, job.job_id, n)[0].slots for n in range(3)] == [(0, 1, 0, 2), (2, 3), (4,)]
    stored = [load_document(store.layout(job.job_id, n, 0), "x") for n in range(3)]
    assert [d.render([seg.text for seg in d.segments]) for d in stored] == [s.text for s in sources]
    info = store.info(job.job_id)
    assert (info.documents, info.segments, info.total, info.chunks) == (3, 7, 5, 3)


def test_a_big_document_is_stored_window_by_window_with_job_wide_slots(store, tmp_path, monkeypatch):
    monkeypatch.setattr(defaults, "STREAM_WINDOW_BYTES", 40)
    path = tmp_path / "big.txt"
    lines = [f"Line {i} is here. Hello there." for i in range(12)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    job, errors = JobBuilder(store, ReadOptions()), []
    add_files(job, plan_files([path], tmp_path / "out"), tmp_path / "out", errors)
    job.writer.flush()  # what submit does first
    assert not errors
    record = store.document(job.job_id, 0)
    windows = windows_of(store, job.job_id, 0)
    assert record.windows == len(list(StreamedDocument(path, "txt", ReadOptions()).windows())) > 3
    assert [w.first_line for w in windows] == [
        1 + sum(len(v.slots) // 2 for v in windows[:i]) for i in range(len(windows))
    ]
    hello = windows[0].slots[1]
    assert all(w.slots[1::2] == (hello,) * (len(w.slots) // 2) for w in windows)  # one slot, job-wide
    job.submit(out=str(tmp_path / "out"), origin="files")
    for slot, sentence in enumerate(sent_sentences(store, job)):
        store.record(job.job_id, slot, sentence, sentence.upper(), fingerprint="f", hit=False)
    (rendered,) = iter_documents(store, job.job_id, follow=False, poll_interval=0)
    assert "".join(rendered.pieces) == path.read_text(encoding="utf-8").upper()


def test_only_the_most_recent_sentences_share_slots(store, monkeypatch):
    monkeypatch.setattr(defaults, "TRANSLATION_MEMORY_ENTRIES", 2)
    job = JobBuilder(store, ReadOptions())
    for n, text in enumerate(["A one.\nB two.\nC three.\n", "C three.\nA one.\n"]):
        job.add(text_source(f"{n}.txt", text))
    job.writer.flush()
    # Before the second document the job forgot "A one." (its oldest sentence), not "C three.".
    assert [windows_of(store, job.job_id, n)[0].slots for n in range(2)] == [(0, 1, 2), (2, 3)]


def test_a_file_failing_part_way_is_removed_and_the_job_goes_on(store, tmp_path, monkeypatch):
    monkeypatch.setattr(defaults, "STREAM_WINDOW_BYTES", 30)
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "a.jsonl").write_text("".join(f'{{"t": "First {i}."}}\n' for i in range(3)))
    (inputs / "b.jsonl").write_text("".join(f'{{"t": "Second {i}."}}\n' for i in range(6)) + '{"t": 5}\n')
    (inputs / "c.jsonl").write_text('{"t": "First 0. Third."}\n')
    out, errors = tmp_path / "out", []
    job = JobBuilder(store, ReadOptions(fields=("t",)))
    add_files(job, plan_files([inputs], out), out, errors)
    job.writer.flush()
    assert errors == [f"{inputs / 'b.jsonl'}:7:7: field 't' holds int, not a string"]
    assert [record.name for record in store.documents(job.job_id)] == [
        str(inputs / "a.jsonl"),
        str(inputs / "c.jsonl"),
    ]
    assert [w.slots for w in windows_of(store, job.job_id, 1)] == [(0, 3)]  # b's slots were given again
    assert store.client.hkeys(JobKeys(job.job_id).windows) == ["0:0", "0:1", "0:2", "1:0"]
    job.submit(out=str(out), origin="files")
    assert sent_sentences(store, job) == ["First 0.", "First 1.", "First 2.", "Third."]


def sentences_of(source: Source, options: ReadOptions) -> list[str]:
    with source.read(source.format(), options) as (windows, original):
        assert original is None  # only a Parquet file has one
        return [sentence for window in windows for sentence in window.sentences]


def test_stdin_units_become_documents_read_as_translate_reads_them():
    data = b'{"t": "One. Two."}\r\n\n{"t": "Three."}\n{"u": 1}'
    options = ReadOptions(fields=("t",))
    sources = list(stdin_sources(stream_units(iter(data.splitlines(keepends=True))), options.fields))
    assert [s.text for s in sources] == ['{"t": "One. Two."}\r\n', "\n", '{"t": "Three."}\n', '{"u": 1}']
    assert [(s.name, s.format(), s.first_line) for s in sources][2] == ("<stdin>", "jsonl", 3)
    assert [sentences_of(s, options) for s in sources] == [["One.", "Two."], [], ["Three."], []]
    assert next(stdin_sources([(1, "Hi.\n")], ())).format() == "txt"


def test_stdin_errors_name_line_and_column():
    bad = list(stdin_sources([(1, '{"t": "a"}\n'), (2, '{"t": \n')], ("t",)))[1]
    with pytest.raises(DocumentError, match=r"<stdin>:2:\d+: invalid JSON"):
        sentences_of(bad, ReadOptions(fields=("t",)))


def test_files_keep_targets_and_refuse_collisions(store, tmp_path):
    for name in ("a/x.txt", "b/x.txt", "c/y.md"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(b"Hi.\r\n")
    out, errors = tmp_path / "out", []
    job = JobBuilder(store, ReadOptions())
    add_files(job, plan_files([tmp_path / "a/x.txt", tmp_path / "c"], out), out, errors)
    job.writer.flush()
    records = store.documents(job.job_id)
    assert [(r.fmt, r.target) for r in records] == [("txt", "x.zh.txt"), ("md", "y.md")] and not errors
    assert [load_document(store.layout(job.job_id, n, 0), "x").segments[0].text for n in range(2)] == [
        "Hi."
    ] * 2
    with pytest.raises(DocumentError, match="would both be written to"):
        plan_files([tmp_path / "a/x.txt", tmp_path / "b/x.txt"], out)


def test_each_bad_file_is_reported_and_the_others_kept(store, tmp_path, monkeypatch):
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "good.txt").write_text("Hello there.\n")
    (inputs / "bad.txt").write_bytes(b"fine\n\xff\n")
    (inputs / "long.md").write_text("x" * 40 + "\n")
    (inputs / "odd.jsonl").write_text('{"text": 5}\n')
    os.mkfifo(inputs / "pipe.txt")
    monkeypatch.chdir(tmp_path)  # named relatively: stored by their absolute path, reported as given
    out, errors = tmp_path / "out", []
    job = JobBuilder(store, ReadOptions(fields=("text",), limits=Limits(line_bytes=32)))
    add_files(job, plan_files([Path("in")], out), out, errors)
    job.writer.flush()
    assert [(r.name, r.target) for r in store.documents(job.job_id)] == [
        (str(inputs / "good.txt"), "good.txt")
    ]
    given = Path("in")
    assert errors == [
        f"{given / 'bad.txt'}:2: not valid UTF-8 (invalid start byte)",
        f"{given / 'long.md'}:1: line longer than 32 bytes (TRANSQUEUE_MAX_LINE_BYTES)",
        f"{given / 'odd.jsonl'}:1:10: field 'text' holds int, not a string",
        f"{given / 'pipe.txt'}: not a regular file (a FIFO); not read",
    ]


def store_job(store: JobStore, text: str = TEXT) -> str:
    """A job of one document a.txt holding `text`; its chunks go to a queue nobody reads."""
    job = JobBuilder(store, ReadOptions())
    job.add(text_source("a.txt", text))
    return job.submit(out="", origin="files")


def rendered_text(store: JobStore, job_id: str) -> str | None:
    (rendered,) = iter_documents(store, job_id, follow=False, poll_interval=0)
    return None if rendered.pieces is None else "".join(rendered.pieces)


def test_render_waits_for_every_sentence_and_keeps_dead_ones_in_english(store):
    job_id = store_job(store)
    assert rendered_text(store, job_id) is None
    store.record(job_id, 0, "Hello there.", "你好。", fingerprint="f", hit=False)
    store.record(job_id, 1, "How are you?", "你好吗？", fingerprint="f", hit=False)
    assert rendered_text(store, job_id) is None
    letter = DeadLetter(slot=2, text="Fine.", reason="boom", chunk=0, deliveries=1, at=0.0)
    store.dead_letter(job_id, letter)
    (rendered,) = iter_documents(store, job_id, follow=False, poll_interval=0)
    assert rendered.dead == []  # filled in as the windows are rendered
    doc = parse_text(TEXT, "txt", ReadOptions(), Path("a.txt"))
    assert "".join(rendered.pieces) == doc.render(["你好。", "你好吗？", "你好。", "Fine."])
    assert rendered.dead == [({"line": 3}, letter)]  # with the line where "Fine." starts


def test_render_uses_the_segments_of_submit_time(store, monkeypatch):
    job_id = store_job(store, "First one. Second one.\n")
    store.record(job_id, 0, "First one.", "一。", fingerprint="f", hit=False)
    store.record(job_id, 1, "Second one.", "二。", fingerprint="f", hit=False)
    monkeypatch.setattr(layout, "split_paragraph", lambda text: ([(0, len(text))], []))
    assert rendered_text(store, job_id) == "一。二。\n"


def test_stored_segments_that_do_not_match_the_slots_name_the_document(store):
    job_id = store_job(store, "First one. Second one.\n")
    for slot, text in enumerate(("一。", "二。")):
        store.record(job_id, slot, "x", text, fingerprint="f", hit=False)
    store.client.hset(JobKeys(job_id).windows, "0:0", WindowRecord((0,)).to_json())
    with pytest.raises(DocumentError, match="a.txt: 2 stored segments but 1 slots"):
        rendered_text(store, job_id)
    store.client.hset(JobKeys(job_id).windows, "0:0", WindowRecord((0, 1)).to_json())
    store.client.hset(JobKeys(job_id).docs, "0", DocumentRecord("a.txt", "txt", windows=2).to_json())
    with pytest.raises(MissingRecord, match="no window 1 of document 0"):
        rendered_text(store, job_id)


def test_a_job_for_a_named_model_needs_no_readable_bundle_here(redis_server, tmp_path):
    from models.bundle import BundleError

    redis_server.client().flushdb()
    store = JobStore.from_settings(Settings(redis_url=redis_server.url, bundle=str(tmp_path / "none")))
    job = JobBuilder(store, ReadOptions(), "0123456789ab")
    assert job.model == "0123456789ab"
    assert job.chunker.lengths(["Hello there."]) == [len("Hello there.")]  # characters
    with pytest.raises(BundleError):  # its own model is needed when the job names none
        JobBuilder(store, ReadOptions())
