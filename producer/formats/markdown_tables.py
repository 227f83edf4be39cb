"""Markdown tables (GFM): a table's delimiter row and the cells of its rows.

The block scanner (``producer.formats.markdown``) reads a paragraph line followed by a
delimiter row with as many cells as a table's header, as cmark-gfm does.
"""

from __future__ import annotations

import re

#: A table's delimiter row, stripped of the spaces and tabs around it. (Matched with the
#: spaces at either end, "-" and a long run of spaces before a letter took quadratic time.)
_TABLE_DELIMITER = re.compile(r"\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?")
#: A pipe between two cells of a table row: one after a backslash is the cell's text.
_CELL_PIPE = re.compile(r"(?<!\\)\|")


def delimiter_row_cells(row: str) -> int:
    """The number of cells of ``row`` (a line's content after its containers' markup,
    stripped of the spaces and tabs around it) if it is a table's delimiter row, else 0."""
    return cell_count(row) if _TABLE_DELIMITER.fullmatch(row) else 0


def cell_count(row: str) -> int:
    """The number of cells of a table row (a line's content after its containers' markup): a
    pipe at either end is none's, nor a pipe after a backslash, as cmark-gfm counts them.
    Spaces and tabs before a leading pipe are a cell."""
    row = row.rstrip(" \t")
    if row.startswith("|"):
        row = row[1:]
    if not row:
        return 0
    pipes = [match.start() for match in _CELL_PIPE.finditer(row)]
    trailing = 1 if pipes and pipes[-1] == len(row) - 1 else 0
    return len(pipes) + 1 - trailing
