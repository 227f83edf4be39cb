"""The in-process path: documents in, translated documents out, no Redis.

``read_tasks`` checks that each file can be read with the options given, and
``translate_files`` translates each document's sentences with a
`models.protocol.SentenceTranslator` (in practice ``models.translator.Translator``), renders
and writes it atomically: a text file window by window into its temporary file
(``producer.streaming``), a Parquet file row group by row group
(``producer.formats.parquet``).
``translate_stream`` does the same for stdin, one line (or reflowed block) at a time.
A sentence repeated in a run is translated once, as long as the run's translation memory
(the ``TRANSLATION_MEMORY_ENTRIES`` most recently translated) still holds it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from pathlib import Path
from typing import BinaryIO

from models.protocol import SentenceTranslator
from producer import defaults
from producer.documents import Document, DocumentError, ReadOptions, format_of, parse_text
from producer.files import FileTask
from producer.formats.jsonl import no_text_in_fields
from producer.formats.parquet import ParquetDocument
from producer.inputs import failure, line_too_long, not_utf8, refuse_nul_text, stdin_lines
from producer.quality import FlagLog
from producer.streaming import StreamedDocument

Progress = Callable[[int], None]


@dataclass(frozen=True)
class RunOptions:
    """How to run: how to read documents, and whether to overwrite existing outputs."""

    read: ReadOptions = ReadOptions()
    force: bool = False


@dataclass
class RunReport:
    """What a run did, for the summary line and the exit status."""

    written: list[Path] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # written, but likely not as meant
    sentences: int = 0
    translated: int = 0  # distinct sentences sent to the model
    seconds: float = 0.0
    quality: FlagLog = field(default_factory=FlagLog)

    def summary(self) -> str:
        """One line: files, sentences, throughput, and anything that needs attention."""
        rate = self.sentences / self.seconds if self.seconds > 0 else 0.0
        parts = [
            f"{len(self.written)} written",
            f"{len(self.skipped)} skipped (output exists; --force overwrites)",
            f"{len(self.errors)} failed",
            f"{self.sentences} sentences ({self.translated} distinct) in {self.seconds:.1f}s",
            f"{rate:.1f} sentences/s",
        ]
        if self.quality.summary():
            parts.append(f"flagged: {self.quality.summary()}")
        return ", ".join(parts)


class Translations:
    """Translations of documents' segments through one translator, remembered for the run."""

    def __init__(self, translator: SentenceTranslator, report: RunReport) -> None:
        self.translator = translator
        self.report = report
        self.memory: dict[str, str] = {}  # oldest first, see `of`
        self.capped: set[str] = set()  # sentences of the memory whose translation hit the length cap

    def of(self, document: Document, progress: Progress = lambda n: None) -> list[str]:
        """The translation of each segment of ``document``, in order.

        The memory is trimmed to TRANSLATION_MEMORY_ENTRIES (oldest first) before the
        document is translated, so that everything about it stays for `was_capped`.
        """
        excess = max(0, len(self.memory) - defaults.TRANSLATION_MEMORY_ENTRIES)
        for oldest in list(islice(self.memory, excess)):
            del self.memory[oldest]
            self.capped.discard(oldest)
        counts: dict[str, int] = {}
        for segment in document.segments:
            counts[segment.text] = counts.get(segment.text, 0) + 1
        todo = [text for text in counts if text not in self.memory]
        self._settled(sum(counts[text] for text in counts if text in self.memory), progress)
        for text, result in zip(todo, self.translator.translate(todo), strict=True):
            self.memory[text] = result.text
            self.report.translated += 1
            if result.hit_length_cap:
                self.capped.add(text)
            self._settled(counts[text], progress)
        return [self.memory[segment.text] for segment in document.segments]

    def _settled(self, sentences: int, progress: Progress) -> None:
        """Count `sentences` translated as they are (an interrupted run's summary counts
        what it translated, not only whole documents), and report them."""
        self.report.sentences += sentences
        progress(sentences)

    def checked(
        self, source: Path, path: str, document: Document, progress: Progress = lambda n: None
    ) -> list[str]:
        """`of`, with each translation checked for the run's quality flags (``source``: the
        document's file as given, ``path`` the same resolved, for the flag records)."""
        texts = self.of(document, progress)
        capped = self.was_capped(document)
        self.report.quality.check(str(source), document, texts, capped, document.first_line, path=path)
        return texts

    def was_capped(self, document: Document) -> Callable[[int], bool]:
        """Whether the translation of segment ``i`` of ``document`` hit the length cap."""
        return lambda i: document.segments[i].text in self.capped


def read_tasks(
    tasks: Iterable[FileTask], options: RunOptions, report: RunReport
) -> list[tuple[FileTask, StreamedDocument | ParquetDocument]]:
    """Each task's document, checked before anything is read (``StreamedDocument.check``,
    ``ParquetDocument.check``); existing outputs are skipped unless ``force``.

    A document that cannot be read or parsed is recorded in ``report.errors``; the others go on.
    """
    documents: list[tuple[FileTask, StreamedDocument | ParquetDocument]] = []
    for task in tasks:
        # lexists: False, not PermissionError, where the target's directory cannot be
        # entered; writing it then fails for that file alone, naming the output
        if os.path.lexists(task.target) and not options.force:
            report.skipped.append(task.target)
            continue
        try:
            fmt = format_of(task.source)
            document: StreamedDocument | ParquetDocument = (
                ParquetDocument(task.source, options.read)
                if fmt == "parquet"
                else StreamedDocument(task.source, fmt, options.read)
            )
            document.check()
            documents.append((task, document))
        except (DocumentError, OSError) as error:
            report.errors.append(failure(task.source, error))
    return documents


def translate_files(
    documents: Iterable[tuple[FileTask, StreamedDocument | ParquetDocument]],
    translator: SentenceTranslator,
    report: RunReport,
    progress: Progress = lambda n: None,
    overwrite: bool = True,
) -> RunReport:
    """Translate, render and atomically write each document; returns ``report``.

    Each file is written as soon as it is done; an interruption leaves the files written so
    far complete and no partial file behind, so the run can simply be repeated. A document
    that turns out to be invalid part way is recorded in ``report.errors`` (nothing is
    written for it, and its quality flags are dropped) and the others go on. Without
    ``overwrite`` (`transqueue translate` passes `RunOptions.force`), an output that
    something else made while its document was translated is left as it is, an error of
    that document. A JSONL document written without a sentence (no record holds its fields)
    is named in ``report.warnings``.
    """
    started = time.perf_counter()
    translations = Translations(translator, report)
    try:
        for task, document in documents:
            path = os.path.realpath(task.source)  # once for the document's windows
            translate = partial(translations.checked, task.source, path, progress=progress)
            before = report.sentences
            try:
                document.write(task.target, translate, overwrite)
            except OSError as error:  # named after the output when writing it failed
                report.quality.drop()
                writing = error.filename is not None and Path(error.filename) != task.source
                report.errors.append(failure(task.target if writing else task.source, error))
                continue
            except DocumentError as error:
                report.quality.drop()
                report.errors.append(failure(task.source, error))
                continue
            report.quality.keep()
            report.written.append(task.target)
            if (
                report.sentences == before
                and isinstance(document, StreamedDocument)
                and document.fmt == "jsonl"
            ):
                report.warnings.append(no_text_in_fields(task.source, document.options.fields))
    finally:
        report.seconds += time.perf_counter() - started
    return report


def stream_units(
    lines: Iterable[bytes], reflow: bool = False, max_line_bytes: int = defaults.MAX_LINE_BYTES
) -> Iterator[tuple[int, str]]:
    """Stdin lines as units: each line, or (``reflow``) each block with the blank line after.

    Yields ``(number of the unit's first line, text)``; line endings are kept. Invalid UTF-8,
    a line longer than ``max_line_bytes`` (without its ``\\n``; a ``\\r`` before it counts)
    and a block longer than that are DocumentErrors naming ``<stdin>:LINE``. Read the lines with
    ``producer.inputs.stdin_lines`` so that a long line is never read whole.
    """
    block: list[str] = []
    block_bytes = 0
    for number, raw in enumerate(lines, start=1):
        if len(raw) - raw.endswith(b"\n") > max_line_bytes:
            raise line_too_long("<stdin>", number, max_line_bytes)
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise not_utf8("<stdin>", number, error, raw if number == 1 else b"") from None
        if number == 1:
            refuse_nul_text(raw, "<stdin>")
        if not reflow:
            yield number, line
        elif line.strip():
            block.append(line)
            block_bytes += len(raw)
            if block_bytes > max_line_bytes:
                raise line_too_long("<stdin>", number + 1 - len(block), max_line_bytes, "paragraph")
        else:
            yield number - len(block), "".join(block) + line
            block, block_bytes = [], 0
    if block:
        yield number + 1 - len(block), "".join(block)


def stdin_units(stream: BinaryIO, options: ReadOptions) -> Iterator[tuple[int, str]]:
    """The units of `stream` (stdin) as `translate -` and `submit -` read it (`stream_units`):
    with `options.fields`, JSONL records, one a line, their values laid out as
    `options.reflow` says; else text lines, or with `options.reflow` blank-line-separated
    blocks. No line or block is read longer than `options.limits.line_bytes`."""
    limit = options.limits.line_bytes
    return stream_units(stdin_lines(stream, limit), options.reflow and not options.fields, limit)


def translate_stream(
    units: Iterable[tuple[int, str]],
    fmt: str,
    translator: SentenceTranslator,
    options: ReadOptions,
) -> Iterator[str]:
    """The translation of each unit (a line, block or JSONL record), as soon as it is ready."""
    translations = Translations(translator, RunReport())
    for first_line, unit in units:
        document = parse_text(unit, fmt, options, Path("<stdin>"), first_line=first_line)
        yield document.render(translations.of(document))
