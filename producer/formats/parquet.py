"""Parquet tables: translate string columns row group by row group (pyarrow, the ``parquet`` extra).

Each row group is read, its selected cells (laid out like ``.txt`` documents, one unit per
line) translated in one call, and written as one row group of a new file with the input's
schema (metadata included) and compression codec, in the same order; every other column is
written back as read. The new file is renamed over the target at the end, so no reader sees
a partial one. Memory is about one row group, whatever the size of the file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from producer.documents import Document, DocumentError, ReadOptions, parse_text
from producer.formats.table import column_indexes
from producer.inputs import check_regular

Translate = Callable[[Document], list[str]]


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
        self._columns(self._open())

    def write(self, target: Path, translate: Translate) -> None:
        """Translate the selected columns with ``translate`` (the translation of each segment
        of a document) and write the table to ``target`` atomically."""
        pa = _pyarrow()
        source = self._open()
        columns = self._columns(source)
        metadata = source.metadata
        codec = metadata.row_group(0).column(0).compression if metadata.num_row_groups else "SNAPPY"
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            with pa.parquet.ParquetWriter(temporary, source.schema_arrow, compression=codec) as writer:
                for group in range(metadata.num_row_groups):
                    table = source.read_row_group(group)
                    table = _translated(pa, table, columns, translate, self.path)
                    writer.write_table(table, row_group_size=max(1, table.num_rows))
            os.replace(temporary, target)
        finally:
            temporary.unlink(missing_ok=True)

    def _open(self) -> Any:
        pa = _pyarrow()
        if not self.options.columns:
            raise DocumentError(f"{self.path}: a Parquet document needs at least one column (--column)")
        if self.path.suffix.lower() != ".parquet":
            raise DocumentError(f"{self.path}: a Parquet file is compressed inside; read it uncompressed")
        check_regular(self.path)
        try:
            return pa.parquet.ParquetFile(self.path)
        except (pa.ArrowException, OSError) as error:
            raise DocumentError(f"{self.path}: not a readable Parquet file ({error})") from None

    def _columns(self, source: Any) -> list[int]:
        pa = _pyarrow()
        schema = source.schema_arrow
        indexes = column_indexes(schema.names, self.options.columns, str(self.path))
        for index in indexes:
            kind = schema.field(index).type
            if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
                raise DocumentError(f"{self.path}: column {schema.names[index]!r} holds {kind}, not strings")
        return indexes


def _translated(pa: Any, table: Any, columns: Sequence[int], translate: Translate, path: Path) -> Any:
    """``table`` with the string cells of ``columns`` translated, in one ``translate`` call."""
    cells: list[Document | None] = []
    for index in columns:
        for value in table.column(index).to_pylist():
            cells.append(None if value is None else parse_text(value, "txt", path=path))
    segments = [segment for cell in cells if cell is not None for segment in cell.segments]
    translations = iter(translate(Document(path, segments)))
    rendered = [
        None if cell is None else cell.render([next(translations) for _ in cell.segments]) for cell in cells
    ]
    for n, index in enumerate(columns):
        field = table.schema.field(index)
        values = rendered[n * table.num_rows : (n + 1) * table.num_rows]
        table = table.set_column(index, field, pa.array(values, type=field.type))
    return table
