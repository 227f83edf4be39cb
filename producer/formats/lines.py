"""Line splitting that keeps line endings (LF or CRLF) apart from line content."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

_LINE = re.compile(r"[^\n]*\n|[^\n]+")


@dataclass(frozen=True)
class Line:
    """One line of a text: ``start..end`` is its content, ``end..stop`` its line ending."""

    start: int
    end: int
    stop: int

    def content(self, text: str) -> str:
        """The line's content, without its line ending."""
        return text[self.start : self.end]


def split_lines(text: str) -> Iterator[Line]:
    """The lines of ``text``; only ``\\n`` (with an optional ``\\r`` before it) ends a line."""
    for match in _LINE.finditer(text):
        start, stop = match.span()
        end = stop
        if text.endswith("\n", start, end):
            end -= 2 if text.endswith("\r\n", start, end) else 1
        yield Line(start, end, stop)
