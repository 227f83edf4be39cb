"""Parquet tables: translate string columns row group by row group (pyarrow, the ``parquet`` extra).

Each row group is read, its selected cells (laid out like ``.txt`` documents, one unit per
line, with the protected spans of the options) translated in one call, and written as one
row group of a new file with the input's schema (metadata included) and compression codec,
in the same order; every other column is written back as read. The new file is renamed
over the target at the end, so no reader sees a partial one. Memory is about one row group,
whatever the size of the file.

A job (`producer.jobs`) stores only the cells of each row group (`cells`), with the size and
sha256 of the file (`opened`), and at fetch writes the table again from that file, found and
checked anew, with the translated cells (`write_cells`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from producer.documents import Document, DocumentError, ReadOptions, parse_text
from producer.files import atomic_target, naming_output
from producer.formats.table import column_indexes
from producer.inputs import check_regular, file_digest, open_regular
from producer.layout import Segment

Translate = Callable[[Document], list[str]]


@dataclass(frozen=True)
class RowGroupCells:
    """The selected cells of a row group, column after column (None: a null cell), and where
    they lie: ``columns`` names the selected columns and ``first_row`` is the 0-based row of
    the file that the group starts at (neither is known of a job stored before they were kept)."""

    cells: list[Document | None]
    columns: tuple[str, ...] = ()
    first_row: int = 0

    def document(self) -> Document:
        """One document of the segments of every cell, in order, numbered through (what a row
        group sends to the model, and what its quality flags are checked on), with the row
        and column of each segment's cell as its ``places`` where they are known."""
        segments: list[Segment] = []
        places: list[tuple[int, str]] = []
        rows = len(self.cells) // len(self.columns) if self.columns else 0
        for k, cell in enumerate(self.cells):
            if cell is None:
                continue
            segments += [replace(segment, index=len(segments) + i) for i, segment in enumerate(cell.segments)]
            if rows:
                places += [(self.first_row + k % rows, self.columns[k // rows])] * len(cell.segments)
        return Document(None, segments, places=places if self.columns else None)

    def sentences(self) -> list[str]:
        """The text of each segment of ``document``, in its order, without building it."""
        return [segment.text for cell in self.cells if cell is not None for segment in cell.segments]

    def render(self, translations: Sequence[str]) -> list[str | None]:
        """Each cell rendered with its segments' translations (``translations``: those of
        ``document``, in order); a null cell stays null."""
        remaining = iter(translations)
        return [
            None if cell is None else cell.render([next(remaining) for _ in cell.segments])
            for cell in self.cells
        ]


def _pyarrow() -> Any:
    """The pyarrow modules; DocumentError saying how to install them when they are missing."""
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise DocumentError("Parquet needs pyarrow: pip install 'transqueue[parquet]'") from None
    return pyarrow


@dataclass(frozen=True)
class ParquetDocument:
    """A Parquet file to translate, a row group at a time, into ``write``'s target."""

    path: Path
    options: ReadOptions

    def check(self) -> None:
        """DocumentError now for missing options, columns that are not there or not strings,
        a compressed (``.gz``/``.zst``) Parquet file, or a file that is not Parquet."""
        self._columns(self._open(self.path))

    def write(self, target: Path, translate: Translate, overwrite: bool = True) -> None:
        """Translate the selected columns with ``translate`` (the translation of each segment
        of a document) and write the table to ``target`` atomically (without ``overwrite``,
        only if ``target`` still does not exist: `producer.files.atomic_target`)."""
        source = self._open(self.path)
        columns = self._columns(source)

        rows = 0  # before the row group being translated

        def translated(table: Any) -> Any:
            nonlocal rows
            group = self._cells(table, columns, rows)
            rows += table.num_rows
            return _with_cells(table, columns, group.render(translate(group.document())))

        self._rewrite(source, target, translated, overwrite)

    @contextmanager
    def opened(self) -> Iterator[tuple[Any, tuple[int, str]]]:
        """The file (a ``pyarrow.parquet.ParquetFile``, checked as ``check`` does) and its size
        and sha256, read through the one handle it is read with, so that a file replaced
        meanwhile is never taken for it."""
        self._columns(self._open(self.path))  # options, suffix and kind of file first
        with open_regular(self.path) as handle:
            original = file_digest(handle)
            handle.seek(0)
            yield self._open(handle), original

    def cells(self, source: Any) -> Iterator[RowGroupCells]:
        """The cells of the selected columns of each row group of ``source`` (``opened``),
        parsed, column after column; only those columns are read."""
        columns = self._columns(source)
        names = [source.schema_arrow.names[index] for index in columns]
        first_row = 0
        for group in range(source.metadata.num_row_groups):
            table = self._row_group(source, group, names)
            yield self._cells(table, range(len(columns)), first_row)
            first_row += table.num_rows

    def write_cells(
        self, source: Any, target: Path, groups: Iterator[list[str | None]], overwrite: bool = True
    ) -> None:
        """Write ``source`` (``opened``) to ``target`` atomically (``overwrite`` as in
        `write`) with the selected cells of each row group replaced by the next of ``groups``;
        DocumentError, and nothing written, when they do not match its row groups."""
        columns = self._columns(source)

        def rebuilt(table: Any) -> Any:
            values = next(groups, None)
            if values is None or len(values) != len(columns) * table.num_rows:
                raise DocumentError(f"{self.path}: the stored cells do not match its row groups")
            return _with_cells(table, columns, values)

        def no_more() -> None:
            if next(groups, None) is not None:
                raise DocumentError(f"{self.path}: more row groups stored than it has")

        self._rewrite(source, target, rebuilt, overwrite, no_more)

    def _cells(self, table: Any, columns: Sequence[int], first_row: int) -> RowGroupCells:
        """The cells of ``columns`` of ``table`` (a row group whose first row is row
        ``first_row`` of the file), parsed; DocumentError naming the column and row of a
        cell that is not valid UTF-8 (a writer that did not check its strings)."""
        options = ReadOptions(protect=self.options.protect)
        cells = [
            None if value is None else parse_text(value, "txt", options, self.path)
            for index in columns
            for value in self._strings(table, index, first_row)
        ]
        return RowGroupCells(cells, tuple(table.schema.names[index] for index in columns), first_row)

    def _strings(self, table: Any, index: int, first_row: int) -> list[str | None]:
        """The values of column ``index`` of ``table`` (a row group whose first row is row
        ``first_row`` of the file), None for a null; DocumentError naming the column and
        the row of the first value that is not valid UTF-8."""
        column = table.column(index)
        try:
            return column.to_pylist()
        except UnicodeDecodeError as error:
            row = next(row for row, value in enumerate(column) if _undecodable(value))
            raise DocumentError(
                f"{self.path}: row {first_row + row:,} (0-based), column "
                f"{table.schema.names[index]!r}: not valid UTF-8 ({error.reason})"
            ) from None

    def _row_group(self, source: Any, group: int, columns: Sequence[str] | None = None) -> Any:
        """Row group ``group`` of ``source`` (only ``columns``, if given); DocumentError
        naming the file and the row group where its data cannot be read (a corrupt page, or
        an I/O error)."""
        pa = _pyarrow()
        try:
            return source.read_row_group(group, columns=columns)
        except (pa.ArrowException, OSError) as error:  # pyarrow's ArrowIOError is an OSError
            count = source.metadata.num_row_groups
            reason = " ".join(str(error).split())  # pyarrow's may run over several lines
            raise DocumentError(
                f"{self.path}: row group {group + 1} of {count} cannot be read ({reason})"
            ) from None

    def _rewrite(
        self,
        source: Any,
        target: Path,
        change: Callable[[Any], Any],
        overwrite: bool,
        last: Callable[[], None] = lambda: None,
    ) -> None:
        """Write each row group of ``source``, through ``change``, as one row group of a
        new file with its schema and codec, then call ``last`` (which may refuse the file by
        raising), and move the file onto ``target`` (`producer.files.atomic_target`). A row
        group that cannot be read is a DocumentError naming ``source`` (`_row_group`); what
        cannot be written (a full disk included) names ``target``."""
        pa = _pyarrow()
        metadata = source.metadata
        storage = _storage(metadata)
        try:
            with atomic_target(target, overwrite) as temporary:
                with naming_output(target):
                    writer = pa.parquet.ParquetWriter(temporary, source.schema_arrow, **storage)
                try:
                    for group in range(metadata.num_row_groups):
                        table = change(self._row_group(source, group))
                        with naming_output(target):
                            writer.write_table(table, row_group_size=max(1, table.num_rows))
                    last()
                finally:
                    with naming_output(target):
                        writer.close()
        except pa.ArrowException as error:
            raise DocumentError(f"{target}: Parquet cannot write this file: {error}") from None

    def _open(self, where: Path | Any) -> Any:
        pa = _pyarrow()
        if not self.options.columns:
            raise DocumentError(
                f"{self.path}: a Parquet document needs at least one column "
                "(--column, or columns in a schedule entry)"
            )
        if self.path.suffix.lower() != ".parquet":
            raise DocumentError(f"{self.path}: a Parquet file is compressed inside; read it uncompressed")
        check_regular(self.path)
        try:
            return pa.parquet.ParquetFile(where)
        except (pa.ArrowException, OSError) as error:
            raise DocumentError(f"{self.path}: not a readable Parquet file ({error})") from None

    def _columns(self, source: Any) -> list[int]:
        pa = _pyarrow()
        schema = source.schema_arrow
        indexes = column_indexes(schema.names, self.options.columns, str(self.path))
        for index in indexes:
            kind = schema.field(index).type
            if not _holds_strings(pa, kind):
                raise DocumentError(f"{self.path}: column {schema.names[index]!r} holds {kind}, not strings")
        return indexes


def _undecodable(value: Any) -> bool:
    """Whether the string scalar ``value`` holds bytes that are not UTF-8."""
    try:
        value.as_py()
    except UnicodeDecodeError:
        return True
    return False


def _holds_strings(pa: Any, kind: Any) -> bool:
    """Whether a column of type ``kind`` holds strings: string, large_string, string_view
    (pyarrow 16 and later), or a dictionary of one of them (a pandas categorical)."""
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    is_string_view = getattr(pa.types, "is_string_view", None)
    return (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or (is_string_view is not None and is_string_view(kind))
    )


def _with_cells(table: Any, columns: Sequence[int], values: Sequence[str | None]) -> Any:
    """``table`` with the cells of ``columns`` (column after column) set to ``values``, each
    column of its type as it was (a dictionary column is encoded again, nulls as null indices;
    an ordered one keeps the order of its values, `_ordered`)."""
    pa = _pyarrow()
    for n, index in enumerate(columns):
        field = table.schema.field(index)
        column = values[n * table.num_rows : (n + 1) * table.num_rows]
        if pa.types.is_dictionary(field.type) and field.type.ordered:
            array = _ordered(pa, table.column(index), column, field.type)
        else:
            array = pa.array(column, type=field.type)
        table = table.set_column(index, field, array)
    return table


def _ordered(pa: Any, original: Any, values: Sequence[str | None], kind: Any) -> Any:
    """``values``, the translations of the cells of the ordered dictionary column
    ``original``, as an array of its type ``kind`` whose dictionary keeps the order of the
    original's: each translation ranks where the first of the values it translates ranked
    (built from the cells alone, its dictionary would be in the order the cells come in,
    and "low" < "high" could become "高" < "低")."""
    rank: dict[str, int] = {}
    for chunk in original.chunks:
        for value in chunk.dictionary.to_pylist():
            rank.setdefault(value, len(rank))
    ranked: dict[str, int] = {}
    for source, value in zip(original.to_pylist(), values, strict=True):
        if value is not None:
            ranked[value] = min(ranked.get(value, rank[source]), rank[source])
    dictionary = sorted(ranked, key=ranked.__getitem__)
    position = {value: i for i, value in enumerate(dictionary)}
    indices = pa.array([None if value is None else position[value] for value in values], kind.index_type)
    return pa.DictionaryArray.from_arrays(indices, pa.array(dictionary, kind.value_type), ordered=True)


def _storage(metadata: Any) -> dict[str, Any]:
    """How the file of ``metadata`` stores its columns, as ``ParquetWriter`` options: each
    column's codec (`_codecs`), and timestamps as the INT96 that Spark, Hive and Impala
    write where it has any (read as ``timestamp[ns]``, they would be written back as INT64
    nanoseconds, which those engines refuse; the option makes every timestamp INT96). The
    format version is pyarrow's default: writers such as Spark's stamp every file 1.0,
    whose writer turns ``timestamp[ns]`` into microseconds and fails on a value finer."""
    schema = metadata.schema
    return {
        "compression": _codecs(metadata),
        "use_deprecated_int96_timestamps": any(
            schema.column(i).physical_type == "INT96" for i in range(len(schema))
        ),
    }


def _codecs(metadata: Any) -> dict[str, str] | str:
    """Each column's compression codec as its first row group has it, in the names the
    writer takes (pyarrow reads "UNCOMPRESSED" where it writes "none"); "snappy" for a file
    with no row group."""
    if not metadata.num_row_groups:
        return "snappy"
    group = metadata.row_group(0)
    codecs = {}
    for i in range(group.num_columns):
        column = group.column(i)
        codec = column.compression.lower()
        codecs[column.path_in_schema] = "none" if codec == "uncompressed" else codec
    return codecs
