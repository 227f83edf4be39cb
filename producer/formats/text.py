"""Plain text: one unit per line, or (reflow) one paragraph per blank-line-separated block."""

from __future__ import annotations

from collections.abc import Iterator

from producer.formats.lines import Line, split_lines
from producer.layout import LayoutBuilder


def build(builder: LayoutBuilder, reflow: bool = False) -> None:
    """Lay out ``builder.source`` as plain text.

    By default each line is its own paragraph, so output line N translates input line N.
    With ``reflow``, consecutive non-blank lines form one hard-wrapped paragraph.
    """
    text = builder.source
    if not reflow:
        for line in split_lines(text):
            builder.paragraph([trimmed(text, line)])
        return
    block: list[tuple[int, int]] = []
    for line in split_lines(text):
        if line.content(text).strip():
            block.append(trimmed(text, line))
        else:
            builder.paragraph(block)
            block = []
    builder.paragraph(block)


def trimmed(text: str, line: Line) -> tuple[int, int]:
    """The span of a line's content without leading and trailing whitespace."""
    content = line.content(text)
    lead = len(content) - len(content.lstrip())
    return line.start + lead, line.start + len(content.rstrip())


def blank_line_ends(text: str) -> Iterator[int]:
    """Where each blank line of ``text`` ends: with ``reflow``, the places a file may be cut
    into windows that are parsed on their own, since no paragraph goes on past one."""
    for line in split_lines(text):
        if not line.content(text).strip():
            yield line.stop
