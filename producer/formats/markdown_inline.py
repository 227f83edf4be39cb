"""Inline Markdown: which parts of a line are text to translate and which are markup."""

from __future__ import annotations

import re
from collections.abc import Iterator

_URL_END = r"[^\s<>()]*[^\s<>().,;:!?'\"*_~]"
_INLINE = (
    r"(?P<escape>\\[!-/:-@\[-`{-~])"
    r"|(?P<code>(`+).+?(?<!`)(?P=c1)(?!`))"
    r"|(?P<autolink><(?:[A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*|[^\s<>@]+@[^\s<>]+)>)"
    r"|(?P<html><!--.*?-->|</?[A-Za-z][A-Za-z0-9-]*(?:\s+[^<>]*?)?/?>)"
    r"|(?P<image>!\[[^\]]*\](?:\([^)]*\)|\[[^\]]*\])?)"
    r"|(?P<link_end>\]\((?:[^()\s]|\([^()\s]*\))*(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\)"
    r"|\]\[[^\]]*\]|\])"
    r"|(?P<bracket>\[)"
    r"|(?P<url>(?:https?|ftp)://" + _URL_END + r"|www\." + _URL_END + r")"
    r"|(?P<emphasis>\*+|(?<!\w)_+|_+(?!\w)|~~)"
).replace("(`+)", "(?P<c1>`+)")
_MARKUP = re.compile(_INLINE)
_MARKUP_IN_TABLE = re.compile(_INLINE + r"|(?P<pipe>\|)")


def text_spans(line: str, start: int, end: int, table: bool = False) -> Iterator[tuple[int, int]]:
    """Spans of ``line[start:end]`` that are text; everything between them is markup.

    Markup is code spans, autolinks, inline HTML, images, link brackets and targets, bare
    URLs, emphasis markers and (in a table row) cell pipes. Backslash escapes stay in the text.
    Adjacent text spans are merged.
    """
    pattern = _MARKUP_IN_TABLE if table else _MARKUP
    text_start = start
    for match in pattern.finditer(line, start, end):
        if match.lastgroup == "escape":
            continue
        if match.start() > text_start:
            yield text_start, match.start()
        text_start = match.end()
    if end > text_start:
        yield text_start, end
