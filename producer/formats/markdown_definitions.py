"""Markdown link reference definitions: their labels, destinations and titles.

A definition (``[label]: destination "title"``) is passed through whole by the block
scanner (``producer.formats.markdown``). Its label may go on to the next lines, its
destination may be alone on the line after the label, and its title may start on the line
after the destination and go on to the next lines, though not past a blank line or a line
that may start another block; lines that make no whole definition are a paragraph's text.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from producer.formats.markdown_html import html_block_end

#: A definition's destination and optional title, and nothing else on the line.
_DESTINATION = (
    r"(?P<destination><[^<>\n]*>|[^\s<]\S*)"
    r"(?:[ \t]+(?P<title>\"[^\"]*\"?|'[^']*'?|\([^()]*\)?))?[ \t]*$"
)
#: A character of a definition's label: no bracket but an escaped one.
_LABEL = r"(?:[^\[\]\\]|\\.)"
#: A link reference definition (not a footnote, ``[^1]:``): a label (not only spaces), a
#: destination, and an optional title (which may go on to the next lines, or start on the
#: next one), and nothing else on the line; or the label alone, its destination on the next
#: line (see `_reference_end`).
_REFERENCE = re.compile(
    r"[ ]{0,3}\[(?!\^)(?=[ \t]*[^\s\]])" + _LABEL + r"+\]:[ \t]*(?:" + _DESTINATION + r"|$)"
)
#: A definition's label left open on its line, and the line that closes it.
_LABEL_START = re.compile(r"[ ]{0,3}\[(?!\^)(?P<label>" + _LABEL + r"*)$")
_LABEL_END = re.compile(r"(?P<label>" + _LABEL + r"*)\]:[ \t]*(?:" + _DESTINATION + r"|$)")
_LABEL_MAX_CHARS = 999
#: The next line of a definition whose label is alone on its line.
_NEXT_LINE_DESTINATION = re.compile(r"[ \t]*" + _DESTINATION)
_TITLE_START = re.compile(r"[ \t]*[\"'(]")
_TITLE_CLOSER = {'"': '"', "'": "'", "(": ")"}
#: A line that may start a block other than a paragraph or be a table's delimiter row, and
#: so cannot go on a title (read broadly: a title that meets one is no title, and its lines
#: are a paragraph's); one starting with "<" is told by `_interrupts`.
_INTERRUPTS = re.compile(r"[ \t]*(?:[#>*+\-_=|:`~]|\d{1,9}[.)])")


def definition_end(rest: Callable[[int], str], count: int, i: int, content: str) -> int | None:
    """Index of the last line of the link reference definition at the start of ``content``
    (line ``i``'s, after its containers' markup), or None if there is none (`_reference_end`
    tells ``rest`` and ``count``). Its label, not only spaces, may go on to the next lines,
    but not past a blank line, a line that may start another block or 999 characters."""
    definition = _REFERENCE.match(content)
    if definition:
        return _reference_end(rest, count, i, definition)
    start = _LABEL_START.match(content)
    if not start:
        return None
    length, label = len(content), start.group("label").strip()
    for k in range(i + 1, count):
        following = rest(k)
        length += len(following)
        if length > _LABEL_MAX_CHARS or not following.strip() or _interrupts(following) or "|" in following:
            return None
        if "[" in following or "]" in following:
            end = _LABEL_END.match(following)
            if end is None or not (label or end.group("label").strip()):
                return None
            return _reference_end(rest, count, k, end)
        label = label or following.strip()
    return None


def _reference_end(rest: Callable[[int], str], count: int, i: int, definition: re.Match[str]) -> int | None:
    """Index of the last line of the link reference definition matched on line ``i``, or
    None if it is none: a title left open on its line must close on a line after it (and be
    all that is left there), else the line is text; a line after a definition without a
    title that is one (in full) is the definition's. ``rest(k)`` is the content of line
    ``k`` (less than ``count``) after the definition's containers' markup ("" if it is not
    in them all). A label alone on line ``i`` needs its destination on the next line, which
    may not start another block nor hold a pipe."""
    if definition.group("destination") is None:
        following = rest(i + 1) if i + 1 < count else ""
        destination = _NEXT_LINE_DESTINATION.match(following)
        if destination is None or _interrupts(following) or "|" in following:
            return None
        return _reference_end(rest, count, i + 1, destination)
    title = definition.group("title")
    if title is None:
        if i + 1 < count:
            following = rest(i + 1)
            opening = _TITLE_START.match(following)
            if opening and "|" not in following:
                closer = _TITLE_CLOSER[opening.group()[-1]]
                end = _title_end(rest, count, i + 1, following[opening.end() :], closer)
                return i if end is None else end
        return i
    if len(title) > 1 and title[-1] == _TITLE_CLOSER[title[0]]:
        return i
    return _title_end(rest, count, i, "", _TITLE_CLOSER[title[0]])


def _title_end(rest: Callable[[int], str], count: int, j: int, first: str, closer: str) -> int | None:
    """Index of the line closing a link title with ``closer``, looked for in ``first`` (what
    line ``j`` holds after the title's opening) and on the lines after it (`_reference_end`'s
    ``rest`` and ``count``), with nothing but spaces after it; None if a blank line, a line
    that may start another block or holds a table's pipe, another opening parenthesis, text
    after the closer or the end of the text comes first. (Read so, a window ending in a
    title finds no place to cut in the paragraph it reads there instead.)"""
    content = first
    for k in range(j, count):
        if k > j:
            content = rest(k)
            if not content.strip() or _interrupts(content) or "|" in content:
                return None
        end = content.find(closer)
        if closer == ")" and "(" in content[: None if end < 0 else end]:
            return None
        if end >= 0:
            return k if not content[end + 1 :].strip() else None
    return None


def _interrupts(rest: str) -> bool:
    """Whether ``rest`` (a line's content after its containers' markup) may start a block
    other than a paragraph or be a table's delimiter row (`_INTERRUPTS`), or opens an HTML
    block that interrupts a paragraph (a "<" opening none, as an autolink's, does not)."""
    return bool(_INTERRUPTS.match(rest)) or html_block_end(rest, False) is not None
