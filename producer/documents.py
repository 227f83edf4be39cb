"""Documents: read a file into sentences to translate, and render it back with translations.

Public API (shared with the distributed path): ``DocumentError``, ``Segment``, ``Document``,
``ReadOptions``, ``read_document``, ``parse_text``, ``output_path``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from producer import defaults
from producer.compression import split_name
from producer.formats import jsonl, markdown, table, text
from producer.inputs import Limits, decode_input, read_input
from producer.layout import DocumentError, LayoutBuilder, Part, Segment, render
from producer.protect import ProtectError, compile_patterns

__all__ = [
    "Document",
    "DocumentError",
    "ReadOptions",
    "Segment",
    "output_path",
    "parse_text",
    "read_document",
]

FORMATS = ("txt", "md", "jsonl", "csv", "tsv")
BOM = "\ufeff"

#: Why a Parquet file is not read as a text document (``producer.formats.parquet`` reads it).
PARQUET_NOT_TEXT = "a Parquet file is read a row group at a time (producer.formats.parquet), not as text"


@dataclass(frozen=True)
class ReadOptions:
    """How to read documents.

    ``fields``: the JSONL fields to translate (top-level keys or dotted paths).
    ``reflow``: in ``.txt`` (and JSONL values), blank-line-separated blocks are hard-wrapped
    paragraphs rather than one unit per line.
    ``limits``: the longest line and the largest file read (``producer.inputs``).
    ``columns``: the CSV/TSV columns to translate (header names, or else 0-based indexes).
    ``protect``: extra protected-span patterns (regular expressions, ``producer.protect``),
    by default those of ``TRANSQUEUE_PROTECT``.
    """

    fields: tuple[str, ...] = ()
    reflow: bool = False
    limits: Limits = Limits()
    columns: tuple[str, ...] = ()
    protect: tuple[str, ...] = defaults.PROTECT_PATTERNS


@dataclass
class Document:
    """A parsed document: the sentences to translate and the layout around them."""

    path: Path | None
    segments: list[Segment]
    parts: list[Part] = field(default_factory=list, repr=False)
    first_line: int = 1  # of its text in the file (a window of a streamed file starts later)

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


def read_document(path: Path, options: ReadOptions = ReadOptions()) -> Document:
    """Read (`producer.inputs.read_input`) and parse ``path`` (UTF-8, line endings kept),
    choosing the format by suffix."""
    path = Path(path)
    fmt = format_of(path)
    if fmt == "parquet":
        raise DocumentError(f"{path}: {PARQUET_NOT_TEXT}")
    return parse_text(decode_input(read_input(path, options.limits), path), fmt, options, path)


def parse_text(
    content: str,
    fmt: str,
    options: ReadOptions = ReadOptions(),
    path: Path | None = None,
    *,
    first_line: int = 1,
    header: Sequence[str] | None = None,
) -> Document:
    """Parse ``content`` as ``fmt`` ("txt", "md", "jsonl", "csv" or "tsv").

    ``first_line`` is the line number of the content's first line in error messages (for
    content cut from a longer stream); ``header``, for a window of a CSV/TSV table after its
    first, is the table's header (the content then has none). A UTF-8 byte order mark is kept
    in the output and the document after it is parsed as if it were not there. A
    protected-span pattern of ``options`` that is not a valid regular expression is a
    DocumentError.
    """
    where = str(path) if path else "<input>"
    segments: list[Segment] = []
    bom = BOM if content.startswith(BOM) else ""
    try:
        compile_patterns(options.protect)
    except ProtectError as error:
        raise DocumentError(f"{where}: {error}") from None
    builder = LayoutBuilder(content[len(bom) :], segments, lambda p: p + len(bom), options.protect)
    if fmt == "txt":
        text.build(builder, reflow=options.reflow)
    elif fmt == "md":
        markdown.build(builder)
    elif fmt == "jsonl":
        if not options.fields:
            raise DocumentError(f"{where}: a JSONL document needs at least one field (--field)")
        jsonl.build(builder, options.fields, where, options.reflow, first_line)
    elif fmt in defaults.DELIMITERS:
        if not options.columns:
            raise DocumentError(f"{where}: a {fmt.upper()} document needs at least one column (--column)")
        table.build(builder, options.columns, fmt, defaults.DELIMITERS[fmt], where, first_line, header)
    else:
        raise DocumentError(f"{where}: unknown format {fmt!r}; supported: {', '.join(FORMATS)}")
    parts = builder.finish()
    return Document(path, segments, [bom, *parts] if bom else parts, first_line)


def output_path(input_path: Path) -> Path:
    """Where the translation of ``input_path`` goes: ``report.md`` -> ``report.zh.md``,
    ``rows.csv.gz`` -> ``rows.zh.csv.gz``."""
    input_path = Path(input_path)
    stem, suffix, compression = split_name(input_path)
    return input_path.with_name(f"{stem}{defaults.OUTPUT_INFIX}{suffix}{compression}")
