"""JSON Lines: translate named string fields of each record, keep every other byte."""

from __future__ import annotations

import json
import re
from json.decoder import scanstring

from producer import defaults
from producer.formats import text as text_format
from producer.formats.lines import split_lines
from producer.layout import DocumentError, LayoutBuilder

#: Python converts at most 4,300 digits to an int (ValueError past that); see `_integer`.
_INT_DIGITS = 4000


def _integer(digits: str) -> int:
    """A JSON integer's value, or 0 past `_INT_DIGITS`: such a number is valid JSON all the
    same, and only the fields' strings are ever used."""
    return int(digits) if len(digits) <= _INT_DIGITS else 0


_DECODER = json.JSONDecoder(parse_int=_integer)
_WHITESPACE = " \t\n\r"
_SURROGATE = re.compile("[\ud800-\udfff]")
_STRING_OR_BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def build(
    builder: LayoutBuilder,
    fields: tuple[str, ...],
    where: str,
    reflow: bool = False,
    first_line: int = 1,
) -> None:
    """Lay out ``builder.source`` as JSONL, translating the string values of ``fields``.

    A field is a top-level key or a dotted path into nested objects (``meta.title``); an exact
    top-level key wins over a dotted path. A record without the field, or with ``null`` there,
    passes through. A string value is laid out like a ``.txt`` document (one unit per line).
    A field named twice is translated once; a key that a record holds twice (valid JSON,
    which most readers take the last of) is translated in each place where it holds a
    string; a value of another type there passes through unless it is the last (the one
    readers take).
    Invalid JSON (nesting deeper than ``JSON_MAX_DEPTH`` included), a non-string value or a
    value holding a lone surrogate (``"\\ud800"``) is a ``DocumentError`` naming
    ``where``:line:column, counting lines from ``first_line``.
    """
    source = builder.source
    for number, line in enumerate(split_lines(source), start=first_line):
        content = line.content(source)
        if not content.strip(_WHITESPACE):  # JSON's whitespace only: a lone U+00A0 is invalid
            continue
        too_deep = _too_deep(content)
        if too_deep is not None:
            raise DocumentError(
                f"{where}:{number}:{too_deep + 1}: invalid JSON: nested deeper than "
                f"{defaults.JSON_MAX_DEPTH} arrays and objects"
            )
        try:
            record = _DECODER.decode(content)
        except json.JSONDecodeError as error:
            reason = error.msg.removesuffix(" at")  # "Invalid control character at"
            raise DocumentError(f"{where}:{number}:{error.colno}: invalid JSON: {reason}") from None
        if not isinstance(record, dict):
            continue
        values: dict[tuple[int, int], str] = {}
        for field in fields:
            spans = _find(content, _skip(content, 0), field)
            for span in spans:
                value = _DECODER.decode(content[span[0] : span[1]])
                if value is None or (span != spans[-1] and not isinstance(value, str)):
                    continue  # an earlier place of a key held twice, which readers skip: as it is
                if not isinstance(value, str):
                    raise DocumentError(
                        f"{where}:{number}:{span[0] + 1}: field {field!r} holds "
                        f"{type(value).__name__}, not a string"
                    )
                surrogate = _SURROGATE.search(value)
                if surrogate:  # its translation could not be written as UTF-8
                    raise DocumentError(
                        f"{where}:{number}:{span[0] + 1}: field {field!r} holds a lone surrogate "
                        f"(\\u{ord(surrogate.group()):04x}), which is not text"
                    )
                values[span] = value
        for (start, end), value in sorted(values.items()):
            _translate_value(builder, line.start + start, line.start + end, value, reflow)


def no_text_in_fields(where: object, fields: tuple[str, ...]) -> str:
    """The warning for a JSONL file none of whose records holds text in ``fields``: written
    (or submitted) as it is, most likely for a misspelt field."""
    named = ", ".join(repr(name) for name in fields)
    return f"{where}: no record holds text to translate in --field {named}; kept as it is (a misspelt field?)"


def _too_deep(content: str) -> int | None:
    """The offset of the first ``[`` or ``{`` nested deeper than JSON_MAX_DEPTH (outside
    strings), or None. Only a line with that many brackets in all is scanned."""
    if content.count("[") + content.count("{") <= defaults.JSON_MAX_DEPTH:
        return None
    depth = 0
    for token in _STRING_OR_BRACKET.finditer(content):
        bracket = token.group()
        if bracket in ("[", "{"):
            depth += 1
            if depth > defaults.JSON_MAX_DEPTH:
                return token.start()
        elif bracket in ("]", "}"):
            depth -= 1
    return None


def _translate_value(builder: LayoutBuilder, start: int, end: int, value: str, reflow: bool) -> None:
    raw = builder.source[start:end]
    positions = _raw_positions(raw)
    nested = LayoutBuilder(
        value, builder.segments, lambda p: builder.offset(start + positions[p]), builder.protect
    )
    text_format.build(nested, reflow=reflow)
    builder.encoded(end, raw, value, nested.finish())


def _find(content: str, position: int, field: str) -> list[tuple[int, int]]:
    """The raw spans of ``field``'s value in the object starting at ``position``: one, or
    one for each time the object (or an object on the dotted path) holds the key."""
    members = _members(content, position)
    if field in members:
        return members[field]
    head, dot, rest = field.partition(".")
    while dot:
        objects = [span for span in members.get(head, ()) if content.startswith("{", span[0])]
        found = [inner for span in objects for inner in _find(content, span[0], rest)]
        if found:
            return found
        more, dot, rest = rest.partition(".")
        head = f"{head}.{more}"
    return []


def _members(content: str, position: int) -> dict[str, list[tuple[int, int]]]:
    """Raw value spans by key (each place a key is held), for the (valid) JSON object
    starting at ``position``."""
    members: dict[str, list[tuple[int, int]]] = {}
    position = _skip(content, position + 1)
    while content[position] != "}":
        key, position = scanstring(content, position + 1)
        position = _skip(content, _skip(content, position) + 1)  # past the colon
        _, end = _DECODER.raw_decode(content, position)
        members.setdefault(key, []).append((position, end))
        position = _skip(content, end)
        if content[position] == ",":
            position = _skip(content, position + 1)
    return members


def _skip(content: str, position: int) -> int:
    while position < len(content) and content[position] in _WHITESPACE:
        position += 1
    return position


def _raw_positions(raw: str) -> list[int]:
    """For each decoded character of the JSON string ``raw`` (and the end), its offset in it."""
    positions = []
    i = 1  # past the opening quote
    while i < len(raw) - 1:
        positions.append(i)
        if raw[i] != "\\":
            i += 1
        elif raw[i + 1] != "u":
            i += 2
        elif (
            0xD800 <= int(raw[i + 2 : i + 6], 16) < 0xDC00
            and raw.startswith("\\u", i + 6)
            and (0xDC00 <= int(raw[i + 8 : i + 12], 16) < 0xE000)
        ):
            i += 12  # a surrogate pair decodes to one character
        else:
            i += 6
    positions.append(len(raw) - 1)
    return positions
