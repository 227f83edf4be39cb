"""Distributed jobs, producer side: documents into a job in Redis, results back into documents.

A job stores each document as parsed at submit (its segments and layout, see
`producer.stored_layout`) and, per segment, the *slot* of its sentence: equal sentences
(exactly equal, as `transqueue translate` groups them) share one slot, so a sentence repeated within a
job is sent to the workers once. Slots travel to the workers in chunks of
`Settings.chunk_size` (slot, sentence) pairs, never whole documents.

Outputs are rendered with `Document.render`, exactly as `transqueue translate` renders them,
from the stored segments: a document is never segmented again after submit. A document is
rendered only once every one of its sentences is settled: translated, or given up in the
job's dead letters, in which case the source sentence stays in its place.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from producer.chunking import chunk_sentences, source_lengths
from producer.documents import (
    PARQUET_TRANSLATE_ONLY,
    Document,
    DocumentError,
    ReadOptions,
    format_of,
    parse_text,
)
from producer.files import FileTask, contained
from producer.inputs import decode_input, failure, read_input
from producer.quality import FlagLog
from producer.stored_layout import dump_document, load_document
from store.jobstore import CANCELLED, DeadLetter, DocumentRecord, JobStore, NewJob
from store.keys import new_job_id
from store.queues import model_key, model_queue, send_chunks

STDIN = "<stdin>"


@dataclass(frozen=True)
class Source:
    """A document to submit: its name, format and text.

    ``name`` is the input's absolute path, or ``<stdin>`` for a unit of stdin (whose first line is
    ``first_line``); ``target`` is where its translation goes, relative to the job's
    output directory (empty for stdin).
    """

    name: str
    fmt: str
    text: str
    target: str = ""
    first_line: int = 1


def file_source(task: FileTask, out: Path, data: bytes) -> Source:
    """The Source of a file task's bytes (UTF-8, line endings kept), named by its absolute
    path (fetch refuses to overwrite it, from whichever directory it runs), its target
    relative to `out`; DocumentError for an unknown suffix or invalid UTF-8 (naming the line)."""
    name = os.path.abspath(task.source)
    return Source(
        name, text_format_of(Path(name)), decode_input(data, name), str(task.target.relative_to(out))
    )


def text_format_of(path: Path) -> str:
    """The format of ``path`` (``format_of``), which a job must be able to store as text:
    DocumentError for an unknown suffix, or Parquet."""
    fmt = format_of(path)
    if fmt == "parquet":
        raise DocumentError(f"{path}: {PARQUET_TRANSLATE_ONLY}")
    return fmt


def file_sources(
    tasks: Iterable[FileTask], out: Path, options: ReadOptions, errors: list[str]
) -> list[tuple[Source, Document]]:
    """Read (`producer.inputs.read_input`) and parse the files of `tasks` (from
    `producer.files.plan_files(..., out)`), as `transqueue translate` does: a file that
    cannot be read or parsed is left out and reported in `errors` (file:line: reason)."""
    parsed = []
    for task in tasks:
        name = Path(os.path.abspath(task.source))  # as the job names it, in every error too
        try:
            text_format_of(name)  # an unknown suffix is refused before the file is read
            source = file_source(task, out, read_input(name, options.limits))
            parsed.append((source, parse_source(source, options)))
        except (DocumentError, OSError) as error:
            errors.append(failure(name, error))
    return parsed


def stdin_sources(units: Iterable[tuple[int, str]], fields: tuple[str, ...]) -> list[Source]:
    """Stdin units (`producer.pipeline.stream_units`) as Sources, read as `translate -` does:
    JSONL records when fields are given, else text."""
    fmt = "jsonl" if fields else "txt"
    return [Source(STDIN, fmt, text, first_line=line) for line, text in units]


def parse_source(source: Source, options: ReadOptions) -> Document:
    """Parse a Source; raise DocumentError naming the document and position."""
    return parse_text(source.text, source.fmt, options, Path(source.name), first_line=source.first_line)


@dataclass(frozen=True)
class Plan:
    """A job's documents (with their slots and stored layouts) and its distinct sentences,
    in slot order."""

    documents: list[DocumentRecord]
    layouts: list[str]
    sentences: list[str]


def plan_job(parsed: Iterable[tuple[Source, Document]], options: ReadOptions) -> Plan:
    """Give each distinct sentence of the documents one slot."""
    slot_of: dict[str, int] = {}
    sentences: list[str] = []
    documents: list[DocumentRecord] = []
    layouts: list[str] = []
    for source, document in parsed:
        slots = []
        for segment in document.segments:
            if segment.text not in slot_of:
                slot_of[segment.text] = len(sentences)
                sentences.append(segment.text)
            slots.append(slot_of[segment.text])
        documents.append(
            DocumentRecord(
                source.name,
                source.fmt,
                tuple(slots),
                options.fields,
                options.reflow,
                source.target,
                options.columns,
            )
        )
        layouts.append(dump_document(document))
    return Plan(documents, layouts, sentences)


def submit(
    store: JobStore,
    parsed: Iterable[tuple[Source, Document]],
    options: ReadOptions,
    *,
    out: str,
    origin: str,
    extra: dict[str, str] | None = None,
    model: str | None = None,
) -> str:
    """Store a job of parsed documents and queue its chunks on the queue of `model` (a
    model key; default: the model of the store's settings); returns its id."""
    plan = plan_job(parsed, options)
    job_id = new_job_id()
    own_model = model_key(store.settings)
    model = model or own_model
    queue = model_queue(store.settings, model)
    lengths = (
        source_lengths(store.settings, plan.sentences)
        if model == own_model
        else [len(sentence) for sentence in plan.sentences]  # no tokenizer of that model here
    )
    chunks = chunk_sentences(plan.sentences, lengths, store.settings.chunk_size)
    store.create(
        NewJob(
            job_id=job_id,
            documents=plan.documents,
            layouts=plan.layouts,
            total=len(plan.sentences),
            chunks=len(chunks),
            out=out,
            origin=origin,
            extra=extra or {},
            chunk_items=chunks,
            model=model,
            queue=queue,
        )
    )
    send_chunks(store.settings, job_id, enumerate(chunks), len(chunks), queue)
    store.try_finalize(job_id)
    return job_id


@dataclass(frozen=True)
class Rendered:
    """One document of a job: its translation, or None while sentences are unsettled."""

    n: int
    name: str
    target: str
    text: str | None
    dead: tuple[DeadLetter, ...] = ()


def check_targets(records: Iterable[DocumentRecord], out: Path) -> None:
    """DocumentError, before anything is written, if a document's stored target would land
    outside `out` (`producer.files.contained`) or replace one of the inputs of the job (say
    `fetch --out` names the input directory: targets mirror input names)."""
    records = list(records)
    inputs = {Path(r.name).resolve(): r.name for r in records if r.name != STDIN}
    for record in records:
        target = contained(out, record.target).resolve()
        if target in inputs:
            raise DocumentError(
                f"{out / record.target}: refusing to overwrite input "
                f"{inputs[target]} with the translation of {record.name}"
            )


class JobGone(RuntimeError):
    """The job does not exist (never did, or its keys expired), or was cancelled."""


def render_document(store: JobStore, job_id: str, n: int, flags: FlagLog | None = None) -> Rendered:
    """Render document `n` if all its sentences are settled (see the module docstring), and
    check its translated sentences into `flags` (`producer.quality`).

    Raises DocumentError naming the document when its stored segments, layout and slots
    do not line up.
    """
    record, layout = store.document(job_id, n)
    states = store.slot_states(job_id, record.slots)
    if any(state is None for state in states):
        return Rendered(n, record.name, record.target, None)
    doc = load_document(layout, record.name)
    if len(doc.segments) != len(record.slots):
        raise DocumentError(
            f"{record.name}: {len(doc.segments)} stored segments but "
            f"{len(record.slots)} slots (document {n} of job {job_id})"
        )
    dead = tuple(s for s in states if isinstance(s, DeadLetter))
    translations = [
        seg.text if isinstance(state, DeadLetter) else state
        for seg, state in zip(doc.segments, states, strict=True)
    ]
    if flags is not None:
        capped = store.capped(job_id, record.slots)
        name = f"{STDIN} unit {n + 1}" if record.name == STDIN else record.name
        flags.check(
            name, doc, translations, capped.__getitem__, skip=lambda i: isinstance(states[i], DeadLetter)
        )
    return Rendered(n, record.name, record.target, doc.render(translations), dead)


def iter_documents(
    store: JobStore, job_id: str, *, follow: bool, poll_interval: float, flags: FlagLog | None = None
) -> Iterator[Rendered]:
    """Every document of a job in input order, each complete one checked into `flags`.

    Without `follow`, incomplete documents come back with text None; with it, each document
    is yielded once complete, waiting for it. Raises JobGone when the job disappears or is
    cancelled while documents are still missing.
    """
    info = store.info(job_id)
    if info is None:
        raise JobGone(f"no job {job_id} (unknown or expired)")
    for n in range(info.documents):
        rendered = render_document(store, job_id, n, flags)
        while follow and rendered.text is None:
            info = store.info(job_id)
            if info is None or info.state == CANCELLED:
                raise JobGone(f"job {job_id} was {'cancelled' if info else 'removed'}")
            time.sleep(poll_interval)
            rendered = render_document(store, job_id, n, flags)
        yield rendered
