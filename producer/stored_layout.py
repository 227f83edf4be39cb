"""A parsed document as JSON, so that a job renders it exactly as it was segmented at submit.

Re-parsing a document at fetch time could segment it differently (pysbd timing out, a
different pysbd), and the stored translations would then land in the wrong places. So a job
stores each document's segments (spans and texts) and its layout (`producer.layout`), and
renders from them without segmenting again. ``load_document(dump_document(doc), name)``
renders byte for byte like ``doc``.

Format: ``{"segments": [[start, end, text], ...], "parts": [part, ...]}`` (a segment that the
segmenter cut for length is ``[start, end, text, 1]``) where a part is
passthrough text (a JSON string), ``{"slot": i}`` (plus ``"source"`` where the source text
differs from the segment's text, and ``"marks": [[opening, inner, closing], ...]`` where the
sentence was sent without inline markup), ``{"gap": text}``, or ``{"raw": raw, "parts": [...]}`` for a
JSON string value (its decoded value is ``json.loads(raw)``), with ``"codec": "csv"`` (or
``"tsv"``) for a table cell instead (``producer.cells``).

A row group of a Parquet table is stored as ``{"cells": [cell, ...], "columns": [name, ...],
"first_row": row}`` (``dump_cells``), where a cell is ``null`` (a null cell) or a stored
document as above, in the order ``producer.formats.parquet`` reads them (column after column),
``columns`` names the selected columns and ``first_row`` is the 0-based row of the file the
group starts at (a job stored before 2026-12-03 has neither: its positions are not known).
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from json.encoder import encode_basestring
from typing import Any

from producer.cells import decode
from producer.documents import Document, DocumentError
from producer.formats.parquet import RowGroupCells
from producer.layout import Encoded, Gap, Mark, Part, Segment, Slot
from store.errors import expect_str


def dump_document(document: Document) -> str:
    """JSON of a document's segments and layout (see the module docstring).

    Written piece by piece into one buffer, so that a big document is never held as lists and
    dicts of its parts as well: for a text of short lines those took several times the size
    of the JSON itself (bench/results/inputs.md).
    """
    out = io.StringIO()
    out.write('{"segments":[')
    for i, segment in enumerate(document.segments):
        split = ",1" if segment.split else ""
        out.write(
            f"{',' if i else ''}[{segment.start},{segment.end},{encode_basestring(segment.text)}{split}]"
        )
    out.write('],"parts":')
    _dump_parts(document.parts, document.segments, out)
    out.write("}")
    return out.getvalue()


def dump_cells(group: RowGroupCells) -> str:
    """JSON of a Parquet row group's cells and where they lie (see the module docstring)."""
    cells = ",".join("null" if c is None else dump_document(c) for c in group.cells)
    columns = json.dumps(group.columns, ensure_ascii=False)
    return f'{{"cells":[{cells}],"columns":{columns},"first_row":{group.first_row}}}'


def _dump_parts(parts: Sequence[Part], segments: Sequence[Segment], out: io.StringIO) -> None:
    out.write("[")
    for i, part in enumerate(parts):
        if i:
            out.write(",")
        if isinstance(part, str):
            out.write(encode_basestring(part))
        elif isinstance(part, Slot):
            source = (
                ""
                if part.source == segments[part.index].text
                else f',"source":{encode_basestring(part.source)}'
            )
            marks = [[m.opening, m.inner, m.closing] for m in part.marks]
            if marks:
                source += f',"marks":{json.dumps(marks, ensure_ascii=False, separators=(",", ":"))}'
            out.write(f'{{"slot":{part.index}{source}}}')
        elif isinstance(part, Gap):
            out.write(f'{{"gap":{encode_basestring(part.text)}}}')
        else:
            codec = "" if part.codec == "json" else f'"codec":{encode_basestring(part.codec)},'
            out.write(f'{{{codec}"raw":{encode_basestring(part.raw)},"parts":')
            _dump_parts(part.parts, segments, out)
            out.write("}")
    out.write("]")


def load_document(text: str, name: str) -> Document:
    """The Document that `dump_document` stored; DocumentError naming `name` when the stored
    data is malformed or its slots do not line up with its segments one to one, in order."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
        raise DocumentError(f"{name}: stored document is malformed ({exc!r})") from None
    return _load(data, name)


def _load(data: Any, name: str) -> Document:
    """The Document of the parsed JSON `data` of a stored document; errors as `load_document`."""
    try:
        segments = [_load_segment(i, item) for i, item in enumerate(data["segments"])]
        slots: list[int] = []
        parts = _load_parts(data["parts"], segments, slots)
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise DocumentError(f"{name}: stored document is malformed ({exc!r})") from None
    if slots != list(range(len(segments))):
        raise DocumentError(
            f"{name}: stored layout does not line up with its {len(segments)} segments (slots {slots[:20]})"
        )
    return Document(None, segments, parts)


def load_cells(text: str, name: str) -> RowGroupCells:
    """The row group that `dump_cells` stored; DocumentError naming `name` when malformed."""
    try:
        data = json.loads(text)
        cells, columns, first_row = data["cells"], data.get("columns", []), data.get("first_row", 0)
        if not isinstance(cells, list) or not isinstance(columns, list):
            raise TypeError(f"cells or columns are no list: {text[:80]!r}")
        if type(first_row) is not int or first_row < 0:
            raise ValueError(f"first row {first_row!r:.80} is no row number")
        if columns and len(cells) % len(columns):
            raise ValueError(f"{len(cells)} cells do not fill {len(columns)} columns")
        names = tuple(expect_str(column) for column in columns)
    except (ValueError, TypeError, KeyError, RecursionError) as exc:  # RecursionError: nested too deeply
        raise DocumentError(f"{name}: stored cells are malformed ({exc!r})") from None
    return RowGroupCells([None if cell is None else _load(cell, name) for cell in cells], names, first_row)


def _load_parts(
    raw: list[Any], segments: Sequence[Segment], slots: list[int], encoded: bool = False
) -> list[Part]:
    """The parts of a stored layout; `encoded`: they are those of an encoded value, which holds
    none itself. No parser nests one encoded value in another, and each level would encode
    the one inside it again, doubling its escapes: a few dozen levels, stored in a few
    kilobytes, would render to terabytes."""
    parts: list[Part] = []
    for item in raw:
        if isinstance(item, str):
            parts.append(item)
        elif not isinstance(item, dict):
            raise ValueError(f"part {item!r:.80} is neither text nor an object")
        elif "slot" in item:
            index = int(item["slot"])
            slots.append(index)
            marks = tuple(Mark(str(o), str(i), str(c)) for o, i, c in item.get("marks", ()))
            parts.append(Slot(index, expect_str(item.get("source", segments[index].text)), marks))
        elif "gap" in item:
            parts.append(Gap(str(item["gap"])))
        elif encoded:
            raise ValueError("an encoded value inside another")
        else:
            codec, raw_value = str(item.get("codec", "json")), expect_str(item["raw"])
            value = decode(codec, raw_value)
            nested = tuple(_load_parts(item["parts"], segments, slots, encoded=True))
            parts.append(Encoded(raw_value, value, nested, codec))
    return parts


def _load_segment(index: int, item: list[object]) -> Segment:
    """Segment ``index`` from ``[start, end, text]``, or ``[start, end, text, 1]`` when it was
    split for length; ValueError for anything else."""
    if not isinstance(item, list):
        raise ValueError(f"segment {index}: {item!r:.80}")
    start, end, text, *split = item
    if not isinstance(text, str) or split not in ([], [1]):
        raise ValueError(f"segment {index}: {item!r:.80}")
    return Segment(index, text, int(start), int(end), bool(split))  # type: ignore[arg-type]
