"""Distributed jobs, producer side: documents into a job in Redis, results back into documents.

A job stores each document's source text and, per segment, the *slot* of its sentence:
equal sentences (after `worker.jobstore.normalize_sentence`) share one slot, so a sentence
repeated within a job is sent to the workers once. Slots travel to the workers in chunks
of `Settings.chunk_size` (slot, sentence) pairs, never whole documents.

Outputs are rendered with `Document.render`, exactly as `transqueue translate` renders them.
A document is rendered only once every one of its sentences is settled: translated, or
given up in the job's dead letters, in which case the source sentence stays in its place.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from producer.documents import (
    Document,
    DocumentError,
    ReadOptions,
    Segment,
    format_of,
    output_path,
    parse_text,
)
from producer.formats.lines import split_lines
from worker.celery import TRANSLATE_TASK, app
from worker.jobstore import DeadLetter, DocumentRecord, JobStore, NewJob, normalize_sentence

STDIN = "<stdin>"


@dataclass(frozen=True)
class Source:
    """A document to submit: its name (path as given, or ``<stdin>:LINE``), format, text."""

    name: str
    fmt: str
    text: str


def decode_source(name: str, fmt: str, data: bytes) -> Source:
    """A Source of UTF-8 bytes (line endings kept); DocumentError naming the bad line."""
    try:
        return Source(name, fmt, data.decode("utf-8"))
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise DocumentError(f"{name}:{line}: not valid UTF-8 ({error.reason})") from None


def source_from_bytes(path: Path, data: bytes) -> Source:
    """A Source of a file's bytes, its format chosen by suffix."""
    return decode_source(str(path), format_of(path), data)


def read_source(path: Path) -> Source:
    """Read a document file as a Source."""
    return source_from_bytes(path, path.read_bytes())


def parse_source(source: Source, options: ReadOptions) -> Document:
    """Parse a Source; raise DocumentError naming the document and position."""
    return parse_text(source.text, source.fmt, options, path=Path(source.name))


def split_records(text: str, options: ReadOptions) -> list[tuple[Source, list[Segment]]]:
    """JSONL text (stdin) as one document per record, each with its segments.

    The text is parsed as one document, so that an error names ``<stdin>:LINE:COLUMN``;
    each line (ending included) then becomes a document of its own, so that its records
    can be fetched one by one as they finish. JSONL renders line by line, so the records'
    renderings put together are the rendering of the whole text.
    """
    segments = iter(parse_text(text, "jsonl", options, path=Path(STDIN)).segments)
    pending = next(segments, None)
    records = []
    for number, line in enumerate(split_lines(text), start=1):
        mine = []
        while pending is not None and pending.start < line.stop:
            mine.append(pending)
            pending = next(segments, None)
        records.append((Source(f"{STDIN}:{number}", "jsonl", text[line.start:line.stop]), mine))
    return records


def new_job_id() -> str:
    """A fresh job id."""
    return uuid.uuid4().hex[:12]


@dataclass(frozen=True)
class Plan:
    """A job's documents (with their slots) and its distinct sentences, in slot order."""

    documents: list[DocumentRecord]
    sources: list[str]
    sentences: list[str]


def plan_job(parsed: Iterable[tuple[Source, Sequence[Segment]]], options: ReadOptions) -> Plan:
    """Give each distinct sentence of the documents one slot."""
    slot_of: dict[str, int] = {}
    sentences: list[str] = []
    documents: list[DocumentRecord] = []
    texts: list[str] = []
    for source, segments in parsed:
        slots = []
        for segment in segments:
            key = normalize_sentence(segment.text)
            if key not in slot_of:
                slot_of[key] = len(sentences)
                sentences.append(segment.text)
            slots.append(slot_of[key])
        documents.append(DocumentRecord(source.name, source.fmt, tuple(slots),
                                        options.fields, options.reflow))
        texts.append(source.text)
    return Plan(documents, texts, sentences)


def check_output_names(names: Iterable[str]) -> None:
    """Raise DocumentError when two inputs would be written to the same output file."""
    seen: dict[str, str] = {}
    for name in names:
        out = output_name(name)
        if out in seen:
            raise DocumentError(f"{seen[out]} and {name} would both be written to {out}")
        seen[out] = name


def submit(store: JobStore, parsed: Iterable[tuple[Source, Sequence[Segment]]],
           options: ReadOptions, *, out: str, origin: str,
           extra: dict[str, str] | None = None) -> str:
    """Store a job of documents (with their segments) and queue its chunks; returns its id."""
    plan = plan_job(parsed, options)
    job_id = new_job_id()
    pairs, size = list(enumerate(plan.sentences)), store.settings.chunk_size
    chunks = [pairs[i:i + size] for i in range(0, len(pairs), size)]
    store.create(NewJob(job_id=job_id, documents=plan.documents, sources=plan.sources,
                        total=len(plan.sentences), chunks=len(chunks), out=out, origin=origin,
                        extra=extra or {}))
    with app.connection_for_write(store.settings.redis_url) as connection:
        for n, chunk in enumerate(chunks):
            app.send_task(TRANSLATE_TASK, args=[job_id, n, chunk], connection=connection,
                          queue=store.settings.queue)
    store.try_finalize(job_id)
    return job_id


def output_name(name: str) -> str:
    """File name of a document's translation in the output directory."""
    return output_path(Path(name)).name


@dataclass(frozen=True)
class Rendered:
    """One document of a job: its translation, or None while sentences are unsettled."""

    n: int
    name: str
    text: str | None
    dead: tuple[DeadLetter, ...] = ()


class JobGone(RuntimeError):
    """The job does not exist (never did, or its keys expired), or was cancelled."""


def render_document(store: JobStore, job_id: str, n: int) -> Rendered:
    """Render document `n` if all its sentences are settled (see the module docstring)."""
    record, source = store.document(job_id, n)
    states = store.slot_states(job_id, record.slots)
    if any(state is None for state in states):
        return Rendered(n, record.name, None)
    options = ReadOptions(fields=record.fields, reflow=record.reflow)
    doc = parse_source(Source(record.name, record.fmt, source), options)
    dead = tuple(s for s in states if isinstance(s, DeadLetter))
    translations = [seg.text if isinstance(state, DeadLetter) else state
                    for seg, state in zip(doc.segments, states, strict=True)]
    return Rendered(n, record.name, doc.render(translations), dead)


def iter_documents(store: JobStore, job_id: str, *, follow: bool,
                   poll_interval: float) -> Iterator[Rendered]:
    """Every document of a job in input order.

    Without `follow`, incomplete documents come back with text None; with it, each document
    is yielded once complete, waiting for it. Raises JobGone when the job disappears or is
    cancelled while documents are still missing.
    """
    info = store.info(job_id)
    if info is None:
        raise JobGone(f"no job {job_id} (unknown or expired)")
    for n in range(info.documents):
        rendered = render_document(store, job_id, n)
        while follow and rendered.text is None:
            info = store.info(job_id)
            if info is None or info.state == "cancelled":
                raise JobGone(f"job {job_id} was {'cancelled' if info else 'removed'}")
            time.sleep(poll_interval)
            rendered = render_document(store, job_id, n)
        yield rendered


def write_atomic(path: Path, text: str) -> None:
    """Write UTF-8 text (line endings as they are) so readers never see a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(text.encode("utf-8"))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
