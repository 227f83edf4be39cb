"""Markdown front matter: YAML (``---``) or TOML (``+++``) at the start of a file.

It is looked for only at the start of a file and must close within
``FRONT_MATTER_MAX_CHARS``, so that the block scanner (``producer.formats.markdown``) needs
no more of a file than a window to tell where it ends.
"""

from __future__ import annotations

from collections.abc import Sequence

from producer import defaults
from producer.formats.lines import Line, split_lines


def front_matter_end(text: str, lines: Sequence[Line]) -> int:
    """Number of lines of YAML (---) or TOML (+++) front matter at the start, closed by a line
    that starts within ``FRONT_MATTER_MAX_CHARS``, else 0."""
    if not lines or lines[0].content(text).rstrip() not in ("---", "+++"):
        return 0
    fence = lines[0].content(text).rstrip()
    closers = (fence, "...") if fence == "---" else (fence,)
    for i in range(1, len(lines)):
        if lines[i].start >= defaults.FRONT_MATTER_MAX_CHARS:
            break
        if lines[i].content(text).rstrip() in closers:
            return i + 1
    return 0


def front_matter_open(text: str) -> bool:
    """Whether ``text``, the start of a file, opens front matter that more of the file may
    still close."""
    lines = list(split_lines(text))
    opens = bool(lines) and lines[0].content(text).rstrip() in ("---", "+++")
    return opens and len(text) < defaults.FRONT_MATTER_MAX_CHARS and not front_matter_end(text, lines)
