"""Documents: read a file into sentences to translate, and render it back with translations.

Public API (shared with the distributed path): ``DocumentError``, ``Segment``, ``Document``,
``ReadOptions``, ``Resume``, ``parse_text``, ``window_cuts``, ``output_path``. Files are read
a window at a time by ``producer.streaming``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from producer import defaults
from producer.compression import split_name
from producer.formats import jsonl, markdown, table, text
from producer.inputs import Limits
from producer.layout import DocumentError, LayoutBuilder, Part, Segment, render
from producer.protect import ProtectError, compile_patterns

__all__ = [
    "Document",
    "DocumentError",
    "ReadOptions",
    "Resume",
    "Segment",
    "output_path",
    "parse_text",
    "window_cuts",
]

FORMATS = ("txt", "md", "jsonl", "csv", "tsv")
BOM = "\ufeff"


@dataclass(frozen=True)
class ReadOptions:
    """How to read documents.

    ``fields``: the JSONL fields to translate (top-level keys or dotted paths).
    ``reflow``: in ``.txt`` (and JSONL values), blank-line-separated blocks are hard-wrapped
    paragraphs rather than one unit per line.
    ``limits``: the longest line, and Markdown block or ``--reflow`` paragraph, read
    (``producer.inputs``).
    ``columns``: the CSV/TSV columns to translate (header names, or else 0-based indexes).
    ``protect``: extra protected-span patterns (regular expressions, ``producer.protect``),
    by default those of ``TRANSQUEUE_PROTECT``.
    """

    fields: tuple[str, ...] = ()
    reflow: bool = False
    limits: Limits = Limits()
    columns: tuple[str, ...] = ()
    protect: tuple[str, ...] = defaults.PROTECT_PATTERNS


@dataclass(frozen=True)
class Resume:
    """How a window of a file that does not start it is read (``producer.streaming``): no
    byte order mark is looked for at its start; ``header`` is the names of the header of a
    CSV/TSV table (the window has none), ``markdown`` the Markdown block scanner's state at
    the cut the window starts at (by default: after a blank line, outside any quote or list)."""

    header: Sequence[str] | None = None
    markdown: markdown.Cut = markdown.Cut(0)


@dataclass
class Document:
    """A parsed document: the sentences to translate and the layout around them."""

    path: Path | None
    segments: list[Segment]
    parts: list[Part] = field(default_factory=list, repr=False)
    first_line: int = 1  # of its text in the file (a window of a streamed file starts later)
    #: A Parquet row group's cells (``producer.formats.parquet.RowGroupCells.document``): the
    #: 0-based row and the column of each segment's cell, which its position is given by.
    places: Sequence[tuple[int, str]] | None = field(default=None, repr=False)

    def render(self, translations: Sequence[str]) -> str:
        """The output text, with segment ``i`` replaced by ``translations[i]``.

        Rendering the segment texts themselves reproduces the input exactly.
        """
        if len(translations) != len(self.segments):
            raise ValueError(
                f"{len(translations)} translations for {len(self.segments)} segments"
                + (f" of {self.path}" if self.path else "")
            )
        return render(self.parts, self.segments, translations)


def format_of(path: Path) -> str:
    """The format name for ``path``'s suffix (before a compression suffix such as ``.gz``);
    DocumentError for an unknown suffix."""
    suffix = split_name(path)[1]
    fmt = defaults.FORMAT_BY_SUFFIX.get(suffix.lower())
    if fmt is None:
        supported = ", ".join(sorted(defaults.FORMAT_BY_SUFFIX))
        compressed = ", ".join(defaults.COMPRESSION_SUFFIXES)
        raise DocumentError(
            f"{path}: unsupported format {suffix or '(no suffix)'!r}; supported suffixes: {supported}"
            f" (each optionally followed by {compressed})"
        )
    return fmt


def parse_text(
    content: str,
    fmt: str,
    options: ReadOptions = ReadOptions(),
    path: Path | None = None,
    *,
    first_line: int = 1,
    resume: Resume | None = None,
) -> Document:
    """Parse ``content`` as ``fmt`` ("txt", "md", "jsonl", "csv" or "tsv").

    ``first_line`` is the line number of the content's first line in error messages (for
    content cut from a longer stream); ``resume``, for a window of a file after its first,
    how to go on reading it. A UTF-8 byte order mark at the start of a file (content that
    starts its first line, not resumed) is kept in the output and the document after it is
    parsed as if it were not there. A protected-span
    pattern of ``options`` that is not a valid regular expression is a DocumentError.
    """
    where = str(path) if path else "<input>"
    segments: list[Segment] = []
    bom = BOM if resume is None and first_line == 1 and content.startswith(BOM) else ""
    try:
        compile_patterns(options.protect)
    except ProtectError as error:
        raise DocumentError(f"{where}: {error}") from None
    builder = LayoutBuilder(content[len(bom) :], segments, lambda p: p + len(bom), options.protect)
    if fmt == "txt":
        text.build(builder, reflow=options.reflow)
    elif fmt == "md":
        markdown.build(builder, resume.markdown if resume else None)
    elif fmt == "jsonl":
        if not options.fields:
            raise DocumentError(
                f"{where}: a JSONL document needs at least one field (--field, or fields in a schedule entry)"
            )
        jsonl.build(builder, options.fields, where, options.reflow, first_line)
    elif fmt in defaults.DELIMITERS:
        if not options.columns:
            raise DocumentError(
                f"{where}: a {fmt.upper()} document needs at least one column "
                "(--column, or columns in a schedule entry)"
            )
        header = resume.header if resume else None
        table.build(builder, options.columns, fmt, defaults.DELIMITERS[fmt], where, first_line, header)
    else:
        raise DocumentError(f"{where}: unknown format {fmt!r}; supported: {', '.join(FORMATS)}")
    parts = builder.finish()
    return Document(path, segments, [bom, *parts] if bom else parts, first_line)


def window_cuts(
    content: str, fmt: str, resume: Resume | None = None, complete: bool = True
) -> Iterator[tuple[int, Resume]]:
    """Where ``content``, whole lines of a Markdown (``fmt`` "md") or ``--reflow`` text file (its
    start, or what follows the cut ``resume`` was made at; all of it if ``complete``) may be
    cut into windows parsed on their own, in order: the offset of each cut and how to read
    what follows it. Rendering the windows and joining them gives what rendering the whole
    gives; when ``content`` is only the start of what follows, each of its cuts is a cut of
    the whole (see ``producer.formats.markdown.cuts``)."""
    bom = len(BOM) if resume is None and content.startswith(BOM) else 0
    if fmt == "md":
        for cut in markdown.cuts(content[bom:], resume.markdown if resume else None, complete):
            yield bom + cut.end, Resume(markdown=cut)
    else:
        for end in text.blank_line_ends(content[bom:]):
            yield bom + end, Resume()


def output_path(input_path: Path) -> Path:
    """Where the translation of ``input_path`` goes: ``report.md`` -> ``report.zh.md``,
    ``rows.csv.gz`` -> ``rows.zh.csv.gz``."""
    input_path = Path(input_path)
    stem, suffix, compression = split_name(input_path)
    return input_path.with_name(f"{stem}{defaults.OUTPUT_INFIX}{suffix}{compression}")
