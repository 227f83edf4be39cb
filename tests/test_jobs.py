"""producer.jobs: planning slots, stdin records, output names, rendering from the store."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from producer.documents import DocumentError, ReadOptions, parse_text
from producer.jobs import (
    Source,
    check_output_names,
    decode_source,
    parse_source,
    plan_job,
    render_document,
    split_records,
)
from worker.config import Settings
from worker.jobstore import DeadLetter, JobStore, NewJob

pytest_plugins = ["distributed_support"]

TEXT = "Hello there. How are you?\n\nHello there. Fine.\n"


def test_equal_sentences_share_one_slot_across_documents():
    options = ReadOptions()
    decomposed = unicodedata.normalize("NFD", "Café time.\n")
    sources = [Source("a.txt", "txt", TEXT), Source("b.txt", "txt", "Fine.\nCafé time.\n"),
               Source("c.txt", "txt", decomposed)]
    plan = plan_job([(s, parse_source(s, options).segments) for s in sources], options)
    assert plan.sentences == ["Hello there.", "How are you?", "Fine.", "Café time."]
    assert [d.slots for d in plan.documents] == [(0, 1, 0, 2), (2, 3), (3,)]
    assert plan.sources == [s.text for s in sources]


def test_stdin_records_keep_their_segments_and_line_endings():
    text = '{"t": "One. Two."}\r\n\n{"t": "Three."}\n{"u": 1}'
    options = ReadOptions(fields=("t",))
    records = split_records(text, options)
    assert [s.text for s, _ in records] == ['{"t": "One. Two."}\r\n', "\n", '{"t": "Three."}\n',
                                            '{"u": 1}']
    assert [[seg.text for seg in segs] for _, segs in records] == [["One.", "Two."], [],
                                                                   ["Three."], []]
    assert [s.name for s, _ in records][0] == "<stdin>:1"
    for source, segments in records:  # each record parses alone to the same sentences
        alone = parse_source(source, options).segments
        assert [seg.text for seg in alone] == [seg.text for seg in segments]
    # Rendered record by record, the text is the whole text rendered.
    whole = parse_text(text, "jsonl", options)
    joined = "".join(parse_source(s, options).render([x.text.upper() for x in segs])
                     for s, segs in records)
    assert joined == whole.render([seg.text.upper() for seg in whole.segments])


def test_stdin_errors_name_line_and_column():
    with pytest.raises(DocumentError, match=r"<stdin>:2:\d+: invalid JSON"):
        split_records('{"t": "a"}\n{"t": \n', ReadOptions(fields=("t",)))


def test_outputs_that_would_collide_are_refused():
    check_output_names(["a/x.txt", "b/y.txt"])
    with pytest.raises(DocumentError, match="a/x.txt and b/x.txt would both be written to x.zh"):
        check_output_names(["a/x.txt", "b/x.txt"])


def test_invalid_utf8_names_the_line():
    with pytest.raises(DocumentError, match="in.txt:2: not valid UTF-8"):
        decode_source("in.txt", "txt", b"ok\n\xff\n")


def test_render_waits_for_every_sentence_and_keeps_dead_ones_in_english(redis_server):
    redis_server.client().flushdb()
    store = JobStore.from_settings(Settings(redis_url=redis_server.url))
    options = ReadOptions()
    source = Source("a.txt", "txt", TEXT)
    plan = plan_job([(source, parse_source(source, options).segments)], options)
    store.create(NewJob(job_id="j", documents=plan.documents, sources=plan.sources,
                        total=len(plan.sentences), chunks=1, out="", origin="files"))
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
