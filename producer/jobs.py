"""Distributed jobs, producer side: documents into a job in Redis, results back into documents.

A job stores each document as parsed at submit, as one or more *windows*: a text file
(`producer.streaming`) a window of about ``STREAM_WINDOW_BYTES`` at a time, exactly as
`transqueue translate` streams it, each stdin unit as one window.
Each window is parsed, given its slots, stored (its segments and layout, see
`producer.stored_layout`) and cut into chunks before the next is read, so submit holds
about one window, whatever the size of the job. A segment's *slot* is the job's distinct
sentence it uses: equal sentences (exactly equal, as `transqueue translate` groups them)
share one slot as long as the job remembers the sentence (the
``TRANSLATION_MEMORY_ENTRIES`` most recent distinct sentences, as `translate` remembers
them), so a sentence repeated within a job is sent to the workers once; one repeated after
that gets a new slot, and a worker finds it in the translation memory in Redis. Slots
travel to the workers in chunks of `Settings.chunk_size` (slot, sentence) pairs, never whole
documents.

A Parquet file is stored as one window per row group, holding only its selected cells
(`producer.formats.parquet`) and, in its document record, the file's size and sha256: the
table itself is read again at fetch, from a file that must still have them.

Outputs are rendered with `Document.render`, exactly as `transqueue translate` renders them,
from the stored segments, window after window: a document is never segmented again after
submit, nor held whole. A document is rendered only once every one of its sentences is
settled: translated, or given up in the job's dead letters, in which case the source
sentence stays in its place.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, cast

from models.bundle import BundleError
from producer import defaults
from producer.chunking import Chunker, Pair, character_lengths, source_lengths
from producer.documents import Document, DocumentError, ReadOptions, format_of, parse_text
from producer.files import FileTask, contained, write_atomic
from producer.formats.jsonl import no_text_in_fields
from producer.formats.parquet import ParquetDocument, RowGroupCells
from producer.inputs import STDIN, failure
from producer.quality import FlagLog, Place, segment_places
from producer.stored_layout import dump_cells, dump_document, load_cells, load_document
from producer.streaming import StreamedDocument
from store.errors import is_text
from store.jobstore import CANCELLED, DeadLetter, DocumentRecord, JobStore, NewJob, WindowRecord
from store.keys import new_job_id
from store.queues import model_key, model_queue, send_chunks, send_delivery


@dataclass(frozen=True)
class Window:
    """A window of a document as a job stores it: the sentence of each of its segments, in
    order, its stored layout (`producer.stored_layout`) and the line of the document it
    starts on."""

    sentences: list[str]
    layout: str
    first_line: int = 1


@dataclass(frozen=True)
class Source:
    """A document to submit.

    ``name`` is the input's absolute path (fetch refuses to overwrite it, from whichever
    directory it runs), or ``<stdin>`` for a unit of stdin: ``text``, of format ``fmt``,
    whose first line is line ``first_line`` of stdin. ``target`` is where its translation
    goes, relative to the job's output directory (empty for stdin). ``given`` is the path
    as the user gave it, which the file is read by and messages name (default: ``name``),
    as `transqueue translate` names it.
    """

    name: str
    target: str = ""
    text: str | None = None
    fmt: str = ""
    first_line: int = 1
    given: str = ""

    @property
    def path(self) -> Path:
        """The path the document is read by and named by in messages."""
        return Path(self.given or self.name)

    def format(self) -> str:
        """The document's format; DocumentError for a file of an unknown suffix."""
        return self.fmt or format_of(self.path)

    @contextmanager
    def read(
        self, fmt: str, options: ReadOptions
    ) -> Iterator[tuple[Iterator[Window], tuple[int, str] | None]]:
        """The document's windows, parsed as `transqueue translate` parses it (a text file a
        window at a time, a Parquet file a row group at a time, a stdin unit whole), and for
        a Parquet file its size and sha256 (None otherwise). DocumentError (naming file:line)
        or OSError as soon as the window that holds the problem is read."""
        if fmt == "parquet":
            document = ParquetDocument(self.path, options)
            with document.opened() as (table, original):
                yield (_cells_window(cells) for cells in document.cells(table)), original
        else:
            yield (
                (_text_window(d, d.first_line - self.first_line + 1) for d in self._documents(fmt, options)),
                None,
            )

    def _documents(self, fmt: str, options: ReadOptions) -> Iterator[Document]:
        if self.text is not None:
            yield parse_text(self.text, fmt, options, self.path, first_line=self.first_line)
        else:
            yield from StreamedDocument(self.path, fmt, options).windows()


def _text_window(document: Document, first_line: int) -> Window:
    return Window([segment.text for segment in document.segments], dump_document(document), first_line)


def _cells_window(group: RowGroupCells) -> Window:
    return Window(group.sentences(), dump_cells(group))


def file_source(task: FileTask, out: Path) -> Source:
    """The Source of a file task, named by its absolute path (read and reported by the path
    given), its target relative to `out`."""
    return Source(os.path.abspath(task.source), str(task.target.relative_to(out)), given=str(task.source))


def stdin_sources(units: Iterable[tuple[int, str]], fields: tuple[str, ...]) -> Iterator[Source]:
    """Stdin units (`producer.pipeline.stream_units`) as Sources, read as `translate -` does:
    JSONL records when fields are given, else text."""
    fmt = "jsonl" if fields else "txt"
    for line, text in units:
        yield Source(STDIN, text=text, fmt=fmt, first_line=line)


class JobBuilder:
    """A job being submitted: documents are added one by one (`add`), each stored in Redis
    window by window as it is read, then the job is submitted (`submit`) or discarded.

    `model` is the key of the model the job asks for (default: the model of the store's
    settings, BundleError when its bundle cannot be read); its chunks are ordered by that
    model's token lengths where its tokenizer is here (the store's own model), else by
    characters. A job given its `model` needs no bundle here (`submit --model KEY` on a
    machine whose TRANSQUEUE_BUNDLE names the workers' path).
    """

    def __init__(self, store: JobStore, options: ReadOptions, model: str | None = None) -> None:
        self.store = store
        self.options = options
        self.job_id = new_job_id()
        self.writer = store.writer(self.job_id)
        try:
            own = model_key(store.settings)
        except BundleError:
            if model is None:
                raise
            own = None
        self.model = model or own
        lengths = source_lengths(store.settings) if self.model == own else character_lengths
        self.chunker = Chunker(lengths, store.settings.chunk_size)
        self.slot_of: dict[str, int] = {}  # the most recent distinct sentences, oldest first
        self.documents = 0
        self.segments = 0
        self.total = 0  # slots given

    def add(self, source: Source) -> int:
        """Read, parse and store `source`, a window at a time; the number of its segments.
        DocumentError or OSError when it cannot be read or parsed, or its name is not UTF-8
        (a job stores names as text; `transqueue translate` takes such files); what was
        stored of it is removed first, and the job goes on as if it had never been added."""
        if not (is_text(source.name) and is_text(source.target)):
            raise DocumentError(f"{source.path}: the file name is not UTF-8, which a job cannot store")
        n, windows = self.documents, 0
        total, segments, chunker = self.total, self.segments, self.chunker.state()
        try:
            fmt = source.format()
            with source.read(fmt, self.options) as (read, original):
                for window in read:
                    self._add_window(n, windows, window)
                    windows += 1
        except (DocumentError, OSError):
            self.writer.drop_document(n, windows, range(chunker.chunks, self.chunker.chunks))
            self.slot_of = {text: slot for text, slot in self.slot_of.items() if slot < total}
            self.total, self.segments = total, segments
            self.chunker.restore(chunker)
            raise
        options = self.options
        size, sha256 = original or (0, "")
        record = DocumentRecord(
            source.name,
            fmt,
            windows,
            options.fields,
            options.reflow,
            source.target,
            options.columns,
            size,
            sha256,
        )
        self.writer.document(n, record)
        self.documents += 1
        return self.segments - segments

    def _add_window(self, n: int, w: int, window: Window) -> None:
        """Give each segment of window `w` of document `n` its slot, and store the window and
        the chunks it completes."""
        excess = max(0, len(self.slot_of) - defaults.TRANSLATION_MEMORY_ENTRIES)
        for oldest in list(islice(self.slot_of, excess)):
            del self.slot_of[oldest]
        slots: list[int] = []
        chunks: list[list[Pair]] = []
        for sentence in window.sentences:
            slot = self.slot_of.get(sentence)
            if slot is None:
                slot = self.slot_of[sentence] = self.total
                self.total += 1
                chunks += self.chunker.add(slot, sentence)
            slots.append(slot)
        self.segments += len(slots)
        record = WindowRecord(tuple(slots), window.first_line)
        self.writer.window(n, w, record, window.layout)
        self.writer.chunks(self.chunker.chunks - len(chunks), chunks)

    def submit(self, *, out: str, origin: str, extra: dict[str, str] | None = None) -> str:
        """Store the job's last chunks and counters, then queue its chunks on its model's
        queue, read back from Redis a batch at a time; returns the job's id. An inbox job
        (`extra` naming its inbox) with nothing to translate is sent for delivery at once."""
        chunks = self.chunker.finish()
        self.writer.chunks(self.chunker.chunks - len(chunks), chunks)
        self.writer.flush()
        queue = model_queue(self.store.settings, self.model)
        count = self.chunker.chunks
        self.store.create(
            NewJob(
                job_id=self.job_id,
                documents=self.documents,
                segments=self.segments,
                total=self.total,
                chunks=count,
                out=out,
                origin=origin,
                extra=extra or {},
                model=self.model,
                queue=queue,
            )
        )
        send_chunks(self.store.settings, self.job_id, self.store.chunks(self.job_id, count), count, queue)
        if self.store.try_finalize(self.job_id) and "inbox" in (extra or {}):
            send_delivery(self.store.settings, self.job_id)
        return self.job_id

    def discard(self) -> None:
        """Remove everything stored of the job: it is not submitted after all."""
        self.store.discard(self.job_id)


def add_files(job: JobBuilder, tasks: Iterable[FileTask], out: Path, errors: list[str]) -> list[str]:
    """Add the files of `tasks` (from `producer.files.plan_files(..., out)`) to `job`, read
    as `transqueue translate` reads them: a file that cannot be read or parsed is left out
    and reported in `errors` (file:line: reason). Returns the warnings, as `translate` gives
    them: a JSONL file none of whose records holds text in its fields."""
    warnings: list[str] = []
    for task in tasks:
        source = file_source(task, out)
        try:
            segments = job.add(source)
        except (DocumentError, OSError) as error:
            errors.append(failure(source.path, error))
            continue
        if segments == 0 and source.format() == "jsonl":
            warnings.append(no_text_in_fields(source.path, job.options.fields))
    return warnings


#: A rendered window: a piece of text, or the cells of a Parquet row group.
Piece = str | list[str | None]


@dataclass(frozen=True)
class Rendered:
    """One document of a job: its record, its translation a window at a time as `pieces` is
    consumed (None while sentences are unsettled), and the dead letters of the windows
    rendered so far (all of them once `pieces` is exhausted), each with where in the
    document its sentence starts (`producer.quality.segment_places`)."""

    n: int
    record: DocumentRecord
    pieces: Iterator[Piece] | None
    dead: list[tuple[Place, DeadLetter]] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The document as messages name it (`document_name`)."""
        return document_name(self.record, self.n)


def document_name(record: DocumentRecord, n: int) -> str:
    """Document `n` of a job as messages name it: its file, or "<stdin> unit N" for stdin."""
    return f"{STDIN} unit {n + 1}" if record.name == STDIN else record.name


def report_name(record: DocumentRecord, n: int) -> str:
    """Document `n` of a job as its quality-flag records name it: `document_name`, with a file
    below the current directory named relative to it, as `transqueue translate` names the
    files it is given that way."""
    name = document_name(record, n)
    if record.name == STDIN:
        return name
    relative = os.path.relpath(name)
    return name if relative == os.pardir or relative.startswith(os.pardir + os.sep) else relative


class OriginalMissing(DocumentError):
    """The file a Parquet document of a job was read from is not where it was looked for,
    with the size and sha256 recorded at submit."""


def write_document(
    rendered: Rendered, target: Path, originals: Sequence[Path], overwrite: bool = True
) -> None:
    """Write a complete document (`iter_documents`) to `target` atomically (without
    `overwrite`, only if `target` still does not exist: `producer.files.atomic_target`): its
    text, or the table of a Parquet document's original file with its cells translated. The original is
    the first of `originals` that has the size and sha256 recorded at submit (read through
    the one handle it is checked with); OriginalMissing naming the document and each file
    looked at when none has them, and DocumentError if `target` is that file."""
    record, pieces = rendered.record, rendered.pieces
    if pieces is None:
        raise ValueError(f"{record.name} is not complete")
    if record.fmt != "parquet":
        write_atomic(target, cast("Iterator[str]", pieces), overwrite)
        return
    with _original(record, originals) as (document, table):
        if target.resolve() == document.path.resolve():
            raise DocumentError(f"{target}: refusing to overwrite input {document.path}")
        document.write_cells(table, target, cast("Iterator[list[str | None]]", pieces), overwrite)


@contextmanager
def _original(record: DocumentRecord, candidates: Sequence[Path]) -> Iterator[tuple[ParquetDocument, Any]]:
    """The first of `candidates` that is the original of `record`, opened (see `write_document`)."""
    looked: list[str] = []
    for path in candidates:
        with ExitStack() as stack:
            document = ParquetDocument(Path(path), ReadOptions(columns=record.columns))
            try:
                size = os.stat(path).st_size
                if size != record.size:  # cheaper than its sha256
                    looked.append(f"{path} has {size:,} bytes")
                    continue
                table, found = stack.enter_context(document.opened())
            except (DocumentError, OSError) as error:
                looked.append(failure(Path(path), error))
                continue
            if found == (record.size, record.sha256):
                yield document, table
                return
            looked.append(f"{path} has other content")
    raise OriginalMissing(
        f"{record.name}: the Parquet file it was read from ({record.size:,} bytes, sha256 "
        f"{record.sha256}) is needed to write its translation, and was not found: "
        + ("; ".join(looked) or "no file to look at")
    )


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


def iter_documents(
    store: JobStore, job_id: str, *, follow: bool, poll_interval: float, flags: FlagLog | None = None
) -> Iterator[Rendered]:
    """Every document of a job in input order, each complete one rendered window by window
    as its pieces are consumed, and checked into `flags` (`producer.quality`).

    Without `follow`, incomplete documents come back with pieces None; with it, each
    document is yielded once complete, waiting for it. Raises JobGone when the job
    disappears or is cancelled while documents are still missing. Rendering raises
    DocumentError naming the document when its stored segments, layout and slots do not
    line up.
    """
    info = store.info(job_id)
    if info is None:
        raise JobGone(f"no job {job_id} (unknown or expired)")
    finished = info.finished  # then every sentence is settled: nothing to check
    for n in range(info.documents):
        record = store.document(job_id, n)
        unsettled = None if finished else _first_unsettled(store, job_id, n, record, 0)
        while follow and unsettled is not None:
            info = store.info(job_id)
            if info is None or info.state == CANCELLED:
                raise JobGone(f"job {job_id} was {'cancelled' if info else 'removed'}")
            time.sleep(poll_interval)
            unsettled = _first_unsettled(store, job_id, n, record, unsettled)
        if unsettled is not None:
            yield Rendered(n, record, None)
            continue
        dead: list[tuple[Place, DeadLetter]] = []
        yield Rendered(n, record, _pieces(store, job_id, n, record, flags, dead), dead)


def _first_unsettled(store: JobStore, job_id: str, n: int, record: DocumentRecord, start: int) -> int | None:
    """The first window of document `n` from `start` on with an unsettled sentence, or None."""
    for w in range(start, record.windows):
        if not all(store.settled(job_id, store.window(job_id, n, w).slots)):
            return w
    return None


def _pieces(
    store: JobStore,
    job_id: str,
    n: int,
    record: DocumentRecord,
    flags: FlagLog | None,
    dead: list[tuple[Place, DeadLetter]],
) -> Iterator[Piece]:
    """Each window of document `n` rendered, its dead letters added to `dead` with where
    each one's sentence starts."""
    name = report_name(record, n)
    path = None if record.name == STDIN else os.path.realpath(record.name)
    for w in range(record.windows):
        window = store.window(job_id, n, w)
        doc, render = _loaded(record, store.layout(job_id, n, w))
        if len(doc.segments) != len(window.slots):
            raise DocumentError(
                f"{record.name}: {len(doc.segments)} stored segments but "
                f"{len(window.slots)} slots (window {w} of document {n} of job {job_id})"
            )
        # a translation longer than the model writes for its segment is a CorruptRecord
        states = store.slot_states(job_id, window.slots, [seg.text for seg in doc.segments])
        if any(state is None for state in states):
            raise DocumentError(
                f"{record.name}: sentences of window {w} are no longer settled (job {job_id})"
            )
        if any(isinstance(state, DeadLetter) for state in states):
            place = segment_places(doc, window.first_line)
            dead += [
                (place(seg), state)
                for seg, state in zip(doc.segments, states, strict=True)
                if isinstance(state, DeadLetter)
            ]
        translations = [
            seg.text if isinstance(state, DeadLetter) else state
            for seg, state in zip(doc.segments, states, strict=True)
        ]
        if flags is not None:
            capped = store.capped(job_id, window.slots)
            skip = [isinstance(state, DeadLetter) for state in states]
            flags.check(
                name, doc, translations, capped.__getitem__, window.first_line, skip.__getitem__, path=path
            )
        yield render(translations)


def _loaded(record: DocumentRecord, layout: str) -> tuple[Document, Callable[[list[str]], Piece]]:
    """A stored window: the document of its segments (to check flags on) and its renderer."""
    if record.fmt == "parquet":
        group = load_cells(layout, record.name)
        return group.document(), group.render
    document = load_document(layout, record.name)
    return document, document.render
