"""Encoded values inside a document: a JSON string, or a CSV/TSV cell (RFC 4180 quoting).

``Encoded`` layout parts (``producer.layout``) name their codec: "json" (a JSON string) or
a delimited-table format of ``defaults.DELIMITERS`` (a cell); a value whose translation
changed is written back with ``encode``, and a stored layout gets its decoded value back
with ``decode``.
"""

from __future__ import annotations

import json

from producer import defaults


def decode(codec: str, raw: str) -> str:
    """The value that ``raw`` encodes; ValueError when it is not a valid ``codec`` value."""
    if codec == "json":
        value = json.loads(raw)
        if not isinstance(value, str):
            raise ValueError(f"raw {raw[:40]!r} is not a JSON string")
        return value
    if codec not in defaults.DELIMITERS:
        raise ValueError(f"unknown codec {codec!r}")
    if raw.startswith('"'):
        if len(raw) < 2 or not raw.endswith('"') or '"' in raw[1:-1].replace('""', ""):
            raise ValueError(f"raw {raw[:40]!r} is not a quoted cell")
        return raw[1:-1].replace('""', '"')
    return raw


#: Characters that JSON allows raw in a string but that ``str.splitlines`` (and other
#: readers of JSON Lines) take for line breaks: written escaped, so a record stays one line.
_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def encode(codec: str, value: str, raw: str) -> str:
    """``value`` encoded for ``codec``. A cell is quoted when its original ``raw`` was, or
    when ``value`` holds the delimiter, a quote or a line break (quotes doubled). A JSON
    string escapes every character that a reader could take for a line break."""
    if codec == "json":
        return json.dumps(value, ensure_ascii=False).translate(_LINE_BREAKS)
    special = (defaults.DELIMITERS[codec], '"', "\r", "\n")
    if raw.startswith('"') or any(character in value for character in special):
        return '"' + value.replace('"', '""') + '"'
    return value
