"""Delimited tables (CSV, TSV): translate named columns, keep every other byte.

The first record is the header. Quoting follows RFC 4180 (a quoted cell may hold the
delimiter, line breaks and doubled quotes; a quote inside an unquoted cell is literal), and is
kept byte for byte: a cell is rewritten only where its translation differs, quoted again
when it was quoted or needs it (``producer.cells``). Records are never added or removed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from producer import defaults
from producer.formats import text as text_format
from producer.layout import DocumentError, LayoutBuilder

Record = list[tuple[int, int]]  # the raw span of each cell

#: What ends an unquoted cell, for each delimiter: the delimiter or a line break.
_CELL_END = {
    delimiter: re.compile(f"[{re.escape(delimiter)}\n]") for delimiter in defaults.DELIMITERS.values()
}


def build(
    builder: LayoutBuilder,
    columns: tuple[str, ...],
    codec: str,
    delimiter: str,
    where: str,
    first_line: int = 1,
    header: Sequence[str] | None = None,
) -> None:
    """Lay out ``builder.source`` as a table with a header, translating ``columns``.

    A column is a header name, or else a 0-based index. A cell is laid out like a ``.txt``
    document (one unit per line). A missing column, an unterminated quoted cell, text
    after a closing quote or a header with a carriage return outside quotes (the lines of
    a file that end in CR alone, which are not records) is a DocumentError naming
    ``where``:line (from ``first_line``). With ``header`` (the names of a table's header,
    ``header_of``), the source is a later window of that table's records, without the header.
    """
    source = builder.source
    scanned = scan(source, delimiter, where, first_line)
    if header is None:
        first = next(scanned, None)
        if first is None:
            return
        if _ends_records_in_cr(source, first):
            raise DocumentError(
                f"{where}:{first_line}: a carriage return outside quotes in the header: only a line "
                "feed (LF or CRLF) ends a record, and lines that end in CR alone (as old Mac "
                "programs write them) would be one record; convert them to LF"
            )
        header = [cell_value(source[s:e]) for s, e in first]
    indexes = column_indexes(header, columns, where)
    for record in scanned:
        for index in indexes:
            if index < len(record):
                _translate_cell(builder, *record[index], codec)


def _ends_records_in_cr(source: str, header: Record) -> bool:
    """Whether the ``header`` record of ``source`` holds a carriage return outside quotes
    where a CR line ending would put one: before a delimiter or more text. A CR at the very
    end of the record (a line ending CR CR LF, as a CSV writer given a file opened in
    Windows text mode writes) is only part of its last name."""
    unquoted = [source[s:e] for s, e in header if not source.startswith('"', s)]
    if header and not source.startswith('"', header[-1][0]):
        unquoted[-1] = unquoted[-1].rstrip("\r")
    return any("\r" in raw for raw in unquoted)


def header_of(text: str, delimiter: str, where: str) -> list[str]:
    """The names in the header (first record) of the table ``text``, the start of a file,
    read after any byte order mark as ``parse_text`` reads it; empty for no record."""
    text = text.removeprefix("\ufeff")  # else a quoted first name is read unquoted
    first = next(scan(text, delimiter, where), [])
    return [cell_value(text[s:e]) for s, e in first]


#: How many of a table's column names the error for a missing column lists (a wide table's
#: would make one line of tens of kilobytes).
_LISTED = 20


def column_indexes(header: Sequence[str], columns: tuple[str, ...], where: str) -> list[int]:
    """The sorted distinct indexes of ``columns`` (names, or else 0-based indexes) in ``header``;
    DocumentError naming ``where`` and listing the header's columns for one it lacks, or
    naming the indexes of a name that several columns share (only one of them would be
    translated)."""
    names = [name.lstrip("\ufeff") for name in header]
    indexes: set[int] = set()
    for column in columns:
        if names.count(column) > 1:
            shared = ", ".join(str(i) for i, name in enumerate(names) if name == column)
            raise DocumentError(
                f"{where}: {names.count(column)} columns are named {column!r} (indexes {shared}); "
                "name the ones to translate by their 0-based index"
            )
        if column in names:
            indexes.add(names.index(column))
        elif column.isascii() and column.isdigit() and int(column) < len(names):
            indexes.add(int(column))
        else:
            listed = ", ".join(repr(name) for name in names[:_LISTED])
            more = f" and {len(names) - _LISTED:,} more" if len(names) > _LISTED else ""
            raise DocumentError(
                f"{where}: no column {column!r}; its {len(names):,} columns are {listed}{more}"
            )
    return sorted(indexes)


def cell_value(raw: str) -> str:
    """The text of a cell as it appears in the file (quotes removed, doubled quotes undone)."""
    return raw[1:-1].replace('""', '"') if raw.startswith('"') else raw


def scan(
    text: str, delimiter: str, where: str, first_line: int = 1, partial: bool = False
) -> Iterator[Record]:
    """The records of ``text``, each the raw spans of its cells; a line ending (LF or CRLF)
    outside quotes ends a record. DocumentError for malformed quoting, naming the line; a
    quoted cell left open ends the records instead if ``text`` is ``partial`` (cut short)."""
    position, end = 0, len(text)
    while position < end:
        record: Record = []
        while True:
            if text.startswith('"', position):
                closing = _closing_quote(text, position)
                if closing < 0:
                    if partial:
                        return
                    line = first_line + text.count("\n", 0, position)
                    raise DocumentError(f"{where}:{line}: a quoted cell is never closed")
                stop = closing + 1
                if stop < end and text[stop] not in (delimiter, "\n") and not text.startswith("\r\n", stop):
                    line = first_line + text.count("\n", 0, stop)
                    raise DocumentError(f"{where}:{line}: text after the closing quote of a quoted cell")
            else:
                stop = _unquoted_end(text, position, delimiter)
            record.append((position, stop))
            if stop < end and text[stop] == delimiter:
                position = stop + 1
                continue
            position = stop + (2 if text.startswith("\r\n", stop) else 1)
            break
        yield record


def record_end(text: str, delimiter: str, where: str, first_line: int = 1) -> int:
    """The offset just past the last complete record of ``text`` (one that ends in a line
    break outside quotes), 0 if none: where a window of a bigger table can be cut."""
    cut = 0
    for record in scan(text, delimiter, where, first_line, partial=True):
        stop = record[-1][1]
        if stop < len(text):
            cut = stop + (2 if text.startswith("\r\n", stop) else 1)
    return cut


def _closing_quote(text: str, opening: int) -> int:
    """The offset of the quote closing the cell opened at ``opening``, or -1."""
    position = opening + 1
    while True:
        quote = text.find('"', position)
        if quote < 0:
            return -1
        if not text.startswith('""', quote):
            return quote
        position = quote + 2


def _unquoted_end(text: str, position: int, delimiter: str) -> int:
    """Where the unquoted cell at ``position`` ends: at the next delimiter or line ending.

    One search for whichever comes first, which stops there: two ``find`` calls would each
    scan on to the next of their own character, to the end of the text for a delimiter
    that a one-column table never holds (quadratic in a window of many short records).
    """
    found = _CELL_END[delimiter].search(text, position)
    stop = found.start() if found else len(text)
    if text[stop : stop + 1] == "\n" and stop > position and text[stop - 1] == "\r":
        stop -= 1
    return stop


def _translate_cell(builder: LayoutBuilder, start: int, end: int, codec: str) -> None:
    raw = builder.source[start:end]
    value = cell_value(raw)
    positions = _raw_positions(raw)
    nested = LayoutBuilder(
        value, builder.segments, lambda p: builder.offset(start + positions[p]), builder.protect
    )
    text_format.build(nested)
    builder.encoded(end, raw, value, nested.finish(), codec)


def _raw_positions(raw: str) -> list[int]:
    """For each character of the cell's value (and its end), its offset in ``raw``."""
    if not raw.startswith('"'):
        return list(range(len(raw) + 1))
    positions, i = [], 1
    while i < len(raw) - 1:
        positions.append(i)
        i += 2 if raw.startswith('""', i) else 1
    positions.append(len(raw) - 1)
    return positions
