"""Markdown: translate the text of paragraphs, headings, lists, quotes and tables only.

A line-based block scanner, reading block quotes and list items nested in each other as
CommonMark does (`_scan`): YAML/TOML front matter, fenced and indented code, HTML blocks,
link reference definitions, thematic breaks and table delimiter rows pass through whole
(front matter, HTML blocks, definitions and tables are told by the modules
``producer.formats.markdown_front_matter``, ``markdown_html``, ``markdown_definitions`` and
``markdown_tables``).
Other lines lose their container markup (quote markers, list markers, heading hashes) to
passthrough, and the rest is split into text and inline markup by
``producer.formats.markdown_inline``. Consecutive lines of one paragraph are read as one
paragraph, so sentences hard-wrapped across lines are translated whole; so are sentences
with emphasis, links and images, whose markup is sent to the model without the markup and
put back around the translation (`producer.layout.Mark`). Containers nest at most
``MAX_CONTAINERS`` deep: a marker past that depth is markup that opens none.

A big file is parsed a window at a time (``producer.streaming``): `cuts` tells where the
scanner reads a line blank after its container markers outside any fence or HTML block, or
is about to read a heading, list item or table row, and the state it carries past that
place, which a window starting there is scanned with (`build`'s ``start``). So that the
scanner needs no more of a file than a window to find them, front matter is looked for only
at the start of a file and must close within ``FRONT_MATTER_MAX_CHARS``, and a blank line
ends indented code (indented lines after it are a code block of their own, passed through
alike).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial

from producer.formats.lines import Line, split_lines
from producer.formats.markdown_definitions import definition_end
from producer.formats.markdown_front_matter import front_matter_end, front_matter_open
from producer.formats.markdown_html import BLANK_LINE, html_block_end
from producer.formats.markdown_inline import markup, pair_markup
from producer.formats.markdown_tables import cell_count, delimiter_row_cells
from producer.layout import LayoutBuilder

#: In a container stack: a block quote. A list item (or a footnote) is its width, more than 0:
#: the columns its next lines are indented by past the container around it.
_QUOTE = 0
#: How deep block quotes and list items nest: a marker past that depth is passed through as
#: markup but opens no container, the rest of its line read in the deepest one. (markdown-it
#: stops reading a document at 20 levels of tokens, about 10 containers.) It keeps the work
#: done on a blank line bounded, and a cut's state small.
MAX_CONTAINERS = 64
_SPACES = re.compile(r"[ \t]*")
_WHITESPACE_TO_END = re.compile(r"\s*\Z")
#: A list item's marker, before a space, a tab or the end of the line.
_LIST_MARKER = re.compile(r"(?:[-*+]|(?P<number>\d{1,9})[.)])(?=[ \t]|$)")
#: A footnote's label, which opens a container as a list item does, its next lines indented
#: ``_FOOTNOTE_WIDTH`` columns (as GFM and Pandoc read them).
_FOOTNOTE = re.compile(r"\[\^[^\]]+\]:")
_FOOTNOTE_WIDTH = 4
_TASK = re.compile(r"\[[ xX]\][ \t]+")  # a task list item's box: markup
_HEADING = re.compile(r"#{1,6}(?:[ \t]+|$)")
_FENCE = re.compile(r"(`{3,}|~{3,})")
_CLOSING_FENCE = re.compile(r"(`{3,}|~{3,})[ \t]*$")
_RULE = re.compile(r"([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_UNDERLINE = re.compile(r"(?:=+|-+)[ \t]*$")  # of a setext heading: after a paragraph line


@dataclass(frozen=True)
class _TextLine:
    """A line with translatable content at ``start..end`` (after its container markup).

    ``kind`` is "text" (a paragraph line), "heading" or "table" (a table row, whose cells
    are separate units); ``continues``: whether the line goes on the paragraph of the line
    before it (in its containers, or lazily, out of some of them)."""

    start: int
    end: int
    kind: str
    continues: bool = False


@dataclass(frozen=True)
class Cut:
    """A place where a Markdown file may be cut into windows that are parsed on their own,
    ``end`` (an offset in the text scanned), and the state the block scanner carries past it
    to the next line: the block quotes and list items open there, outermost first
    (``containers``: `_QUOTE` for a quote, a list item's width for an item), the paragraph
    or table open in the last of them (``leaf``: "paragraph" or "table", else None), and
    whether that last container is a list item with nothing in it yet (``empty_item``: a
    blank line ends it).

    A cut comes after a line blank after its container markers, unless it is in a fence or
    an HTML block that goes on past it (no paragraph, table or indented code does), and
    before a heading, a line opening a list item or a table row, unless a fence, an HTML
    block or indented code is open before it."""

    end: int
    containers: tuple[int, ...] = ()
    leaf: str | None = None
    empty_item: bool = False


def build(builder: LayoutBuilder, start: Cut | None = None) -> None:
    """Lay out ``builder.source`` as Markdown: the start of a file (front matter looked for),
    or with ``start`` the text after that cut of a file."""
    paragraph: list[_TextLine] = []
    for line in _scan(builder.source, start):
        if isinstance(line, _TextLine) and paragraph and line.continues:
            paragraph.append(line)
            continue
        _translate(builder, paragraph)
        paragraph = [line] if isinstance(line, _TextLine) else []
    _translate(builder, paragraph)


def cuts(text: str, start: Cut | None = None, complete: bool = True) -> Iterator[Cut]:
    """The places, in order, where ``text`` (whole lines of a Markdown file: its start, or
    what follows ``start``; all of it if ``complete``) may be cut, with what the scanner
    carries past each. When the text is only a part of what follows, each is a cut of the
    whole too: the scanner finds none after a fence, HTML block or paragraph still open at
    the end of the text, and none at all while a file's front matter is open and the text is
    shorter than ``FRONT_MATTER_MAX_CHARS`` (more of it may close it). It may miss one
    before the last line, which only the line after it tells for a table header."""
    if start is None and not complete and front_matter_open(text):
        return
    for line in _scan(text, start):
        if isinstance(line, Cut) and line.end > 0:  # not before the first line
            yield line


def _translate(builder: LayoutBuilder, paragraph: Sequence[_TextLine]) -> None:
    """Translate the runs of text in ``paragraph``: breaking inline markup ends a run, and
    wrapping markup (emphasis, links, images) is put back around the translation."""
    source = builder.source
    matches = [m for line in paragraph for m in markup(source, line.start, line.end, line.kind == "table")]
    pairs = pair_markup(matches)
    wrapping = {span for pair in pairs for span in pair}
    run: list[tuple[int, int]] = []
    k = 0
    for number, line in enumerate(paragraph):
        position = line.start
        while k < len(matches) and matches[k].start() < line.end:
            match = matches[k]
            if match.start() > position:
                run.append((position, match.start()))
            if match.span() not in wrapping:
                builder.paragraph(run, pairs)
                run = []
            position = match.end()
            k += 1
        hard_break = _hard_break(source, line) if number + 1 < len(paragraph) else None
        stop = line.end if hard_break is None else hard_break
        if stop > position:
            run.append((position, stop))
        if hard_break is not None:  # the break is structure: it stays, and ends the run
            builder.paragraph(run, pairs)
            run = []
    builder.paragraph(run, pairs)


def _hard_break(source: str, line: _TextLine) -> int | None:
    """Where the text of ``line`` ends if the line ends in a hard line break (a backslash, or
    two or more spaces, before its line ending), else None."""
    if line.kind == "table" or line.end == line.start:
        return None
    if source[line.end - 1] == "\\" and not source[line.start : line.end].endswith("\\\\"):
        return line.end - 1
    return line.end if source.startswith("  ", line.end) else None


class _Cursor:
    """A place in a line's content: ``offset`` (an index) and ``column`` (a tab goes on to
    the next multiple of 4; a column inside a tab leaves the tab partly read, as CommonMark
    reads the indentation of a list item's lines)."""

    __slots__ = ("_next", "column", "content", "offset")

    def __init__(self, content: str) -> None:
        self.content = content
        self.offset = 0
        self.column = 0
        self._next = (-1, 0)

    def next_nonspace(self) -> tuple[int, int]:
        """The index and the column of the first character from the cursor on that is not a
        space or a tab (the length of the content if none)."""
        if self._next[0] < self.offset:  # (the run of spaces is read once, however far in)
            end = _SPACES.match(self.content, self.offset).end()
            run = self.content[self.offset : end]
            column = self.column + len(run)
            if "\t" in run:
                column = self.column
                for char in run:
                    column += 4 - column % 4 if char == "\t" else 1
            self._next = (end, column)
        return self._next

    def advance(self, columns: int) -> None:
        """Move past ``columns`` columns of spaces and tabs (or as many as there are)."""
        content = self.content
        while columns > 0 and self.offset < len(content) and content[self.offset] in " \t":
            width = 4 - self.column % 4 if content[self.offset] == "\t" else 1
            if width > columns:  # a tab partly read
                self.column += columns
                return
            self.column += width
            self.offset += 1
            columns -= width

    def move(self, offset: int, column: int) -> None:
        """Move to ``offset``, at ``column``."""
        self.offset, self.column = offset, column

    def skip_quote_marker(self, position: int, column: int) -> None:
        """Move past the quote marker at ``position`` (at ``column``) and the space or the
        column of a tab after it."""
        self.move(position + 1, column + 1)
        self.advance(1)


def _blank(content: str, position: int) -> bool:
    """Whether ``content`` has nothing but whitespace from ``position`` on."""
    return position >= len(content) or bool(_WHITESPACE_TO_END.match(content, position))


def _rule(content: str, position: int, tails: dict[str, int]) -> bool:
    """Whether ``content`` from ``position`` on is a thematic break. ``tails`` keeps, for the
    line, where the run of each marker character, spaces and tabs that ends it starts: a line
    of many list markers is read in linear time."""
    char = content[position]
    if char not in tails:
        tails[char] = len(content.rstrip(char + " \t"))
    return position >= tails[char] and bool(_RULE.match(content, position))


def _match(cursor: _Cursor, containers: tuple[int, ...], empty_item: bool) -> int:
    """How many of ``containers`` (outermost first) the line at ``cursor`` goes on, the
    cursor moved past their markup: a quote's marker, indented 3 columns at most, and the
    space after it; a list item's width of indentation, or a blank line, unless the item is
    the last container and has nothing in it yet (``empty_item``)."""
    content = cursor.content
    for k, width in enumerate(containers):
        position, column = cursor.next_nonspace()
        if width == _QUOTE:
            if column - cursor.column > 3 or not content.startswith(">", position):
                return k
            cursor.skip_quote_marker(position, column)
        elif _blank(content, position):  # a blank line goes on the items up to the next quote
            try:
                end = containers.index(_QUOTE, k)
            except ValueError:
                end = len(containers) - empty_item
            cursor.move(position, column)
            return end
        elif column - cursor.column >= width:
            cursor.advance(width)
        else:
            return k
    return len(containers)


def _rest(text: str, lines: Sequence[Line], containers: tuple[int, ...], k: int) -> str:
    """The content of line ``k`` of ``text`` after the markup of ``containers``, or "" if it
    does not go on all of them."""
    cursor = _Cursor(lines[k].content(text))
    if _match(cursor, containers, False) < len(containers):
        return ""
    return cursor.content[cursor.offset :]


def _list_item(cursor: _Cursor, position: int, column: int, interrupting: bool) -> int:
    """If a list item opens at ``position`` (at ``column``) of the cursor's line, its width,
    which its next lines are indented by (from the cursor's column): its marker's
    indentation, the marker and the spaces after it, or one space where these are five
    columns or more (the item opens with indented code) or the line has no more; the cursor
    moved past them. Else 0. A list item that interrupts a paragraph (``interrupting``) has
    text, and an ordered one starts at 1."""
    content = cursor.content
    marker = _LIST_MARKER.match(content, position)
    if not marker:
        return 0
    number = marker.group("number")
    if interrupting and (_blank(content, marker.end()) or (number is not None and int(number) != 1)):
        return 0
    indent = column - cursor.column
    cursor.move(marker.end(), column + marker.end() - position)
    start = cursor.column
    end, end_column = cursor.next_nonspace()
    if _blank(content, end) or end_column - start >= 5:
        cursor.advance(1)
        return indent + marker.end() - position + 1
    cursor.move(end, end_column)
    return indent + marker.end() - position + end_column - start


def _scan(text: str, start: Cut | None) -> Iterator[_TextLine | Cut | None]:
    """Yield a ``_TextLine`` per line with text, a ``Cut`` after each line blank after its
    container markers and before each heading, line opening a list item and table row (see
    `Cut`), and None for each other passthrough line or block. ``start``: see `build`.

    As CommonMark's parsing strategy: each line goes on the open containers whose markup it
    has, and on the fence, HTML block or indented code open in the last of them; else it may
    open more containers and a leaf block (a heading, fence, HTML block, indented code,
    thematic break, setext underline), or go on the open paragraph or table, or lazily on a
    paragraph left open in containers it does not go on, or start a new paragraph (or table,
    or link reference definition)."""
    lines = list(split_lines(text))
    i = 0 if start is not None else front_matter_end(text, lines)
    if i:
        yield None
    start = start or Cut(0)
    containers, leaf, empty_item = start.containers, start.leaf, start.empty_item
    fence = ("", 0)  # the open fence's character and length
    html_end = BLANK_LINE  # what the open HTML block ends at
    #: whether the open paragraph met a delimiter row its last line had not as many cells as
    #: (as cmark-gfm, it then opens no table, whatever lines come after)
    tried = False
    while i < len(lines):
        line = lines[i]
        content = line.content(text)
        before = Cut(line.start, containers, leaf, empty_item)
        cursor = _Cursor(content)
        matched = _match(cursor, containers, empty_item)
        position, column = cursor.next_nonspace()
        blank = _blank(content, position)
        i += 1
        if matched == len(containers):  # the open leaf block may go on
            if leaf == "fence":
                closing = _CLOSING_FENCE.match(content, position)
                if column - cursor.column < 4 and closing and closing.group(1)[0] == fence[0]:
                    leaf = None if len(closing.group(1)) >= fence[1] else leaf
                yield None
                continue
            if leaf == "html" and not (blank and html_end is BLANK_LINE):
                if html_end is not BLANK_LINE and html_end.search(content, cursor.offset):
                    leaf = None
                yield None
                continue
            if leaf == "code" and not blank and column - cursor.column >= 4:
                yield None
                continue
        if leaf not in ("paragraph", "table"):
            leaf = None  # (a fence, HTML block or indented code the line is not in)
        opened: list[int] = []  # the containers the line opens
        item = False  # whether the last of them is a list item (not a quote nor a footnote)
        kind = None  # the leaf block the line opens
        tails: dict[str, int] = {}  # see `_rule`
        while not blank:
            indent = column - cursor.column
            paragraph = leaf == "paragraph" and not opened  # which the line may go on
            interrupting = paragraph and matched == len(containers)  # not lazily
            depth = matched + len(opened)
            if indent >= 4:  # indented code, unless it goes on a paragraph (a table takes none)
                if not paragraph:
                    kind = "code"
                break
            char = content[position]
            if char == ">":
                if depth < MAX_CONTAINERS:
                    opened.append(_QUOTE)
                    item = False
                cursor.skip_quote_marker(position, column)
            elif char == "#" and _HEADING.match(content, position):
                kind = "heading"
                break
            elif char in "`~" and (opening := _fence(content[position:])):
                kind, fence = "fence", (opening.group(1)[0], len(opening.group(1)))
                break
            elif char == "<" and (end := html_block_end(content[position:], not paragraph)):
                kind, html_end = "html", end
                break
            elif interrupting and _UNDERLINE.match(content, position):
                kind = "underline"
                break
            elif char in "-*_" and _rule(content, position, tails):
                kind = "rule"
                break
            elif width := _list_item(cursor, position, column, interrupting):
                if depth < MAX_CONTAINERS:
                    opened.append(width)
                    item = True
            elif char == "[" and (footnote := _FOOTNOTE.match(content, position)):
                if depth < MAX_CONTAINERS:
                    opened.append(_FOOTNOTE_WIDTH)
                    item = False
                cursor.move(footnote.end(), column + footnote.end() - position)
            else:
                break
            position, column = cursor.next_nonspace()
            blank = _blank(content, position)
        opens_item = any(width != _QUOTE for width in opened)  # (a footnote's too)
        end = line.start + max(position, len(content.rstrip()))
        goes_on = matched == len(containers) and not opened  # in the open leaf block's containers
        # on the paragraph left open in containers the line does not go on (which stay open)
        lazy = kind is None and not blank and leaf == "paragraph" and not opened and not goes_on
        if not lazy:
            containers = containers[:matched] + tuple(opened)
            empty_item = item and blank
        header = False
        if kind is None and not blank:
            if not ((goes_on or lazy) and leaf == "paragraph"):
                tried = False  # (the line starts a paragraph, if any)
            if not tried and i < len(lines) and (cells := _delimiter_cells(text, lines, containers, i)):
                # (a lazy line's spaces before a pipe are a cell of it, as cmark-gfm reads them)
                header = cells == cell_count(content[cursor.offset if lazy else position :])
                tried = not header
            if header or (goes_on and leaf == "table"):
                kind = "table"
        if lazy and kind is None:
            yield _TextLine(line.start + position, end, "text", continues=True)
            continue
        if (opens_item or kind in ("heading", "table")) and before.leaf in (None, "paragraph", "table"):
            yield before
        if kind == "table":
            yield _TextLine(line.start + position, end, "table")
            if header:  # its delimiter row
                yield None
                i += 1
            leaf = "table"
        elif kind == "heading":
            heading = _HEADING.match(content, position)
            yield _TextLine(
                line.start + heading.end(), line.start + _heading_end(content, heading.end()), "heading"
            )
            leaf = None
        elif kind is not None:  # indented code, a fence, an HTML block, a thematic break or underline
            leaf = kind if kind in ("code", "fence", "html") else None
            if kind == "html" and html_end is not BLANK_LINE and html_end.search(content, position):
                leaf = None  # (it ends on its first line)
            yield None
        elif blank:
            leaf = None
            yield Cut(line.stop, containers, None, empty_item)
        elif goes_on and leaf == "paragraph":
            yield _TextLine(line.start + position, end, "text", continues=True)
        elif (
            last := definition_end(
                partial(_rest, text, lines, containers), len(lines), i - 1, content[position:]
            )
        ) is not None:
            leaf = None
            yield None
            i = last + 1
        else:  # a new paragraph
            task = _TASK.match(content, position) if item else None
            leaf = "paragraph"
            yield _TextLine(line.start + (task.end() if task else position), end, "text")


def _fence(rest: str) -> re.Match[str] | None:
    """The opening code fence at the start of ``rest``; a backtick fence's info string holds
    no backtick (```js``` starts a paragraph with a code span, as in CommonMark)."""
    fence = _FENCE.match(rest)
    if fence and fence.group(1)[0] == "`" and "`" in rest[fence.end() :]:
        return None
    return fence


def _heading_end(content: str, start: int) -> int:
    """Where the text of a heading starting at ``start`` of ``content`` ends: before its
    closing sequence (``#``s after a space or tab, or after the opening ``#``s) and the spaces
    and tabs around it. (A regex searched from ``start`` took quadratic time in a long run of
    spaces.)"""
    end = max(len(content.rstrip(" \t")), start)
    hashes = start + len(content[start:end].rstrip("#"))
    if hashes < end and (hashes == start or content[hashes - 1] in " \t"):
        return max(len(content[:hashes].rstrip(" \t")), start)
    return end


def _delimiter_cells(text: str, lines: Sequence[Line], containers: tuple[int, ...], k: int) -> int:
    """The number of cells of line ``k`` of ``text`` if it is a table's delimiter row after
    the markup of ``containers`` (all of them), else 0. A line that starts another block after
    a paragraph line is none: indented 4 columns or more, a setext heading's underline
    (``-``, ``---``) or a list item (``- |``)."""
    content = lines[k].content(text)
    if not content.rstrip(" \t").endswith(("-", ":", "|")):  # (most lines: none read further)
        return 0
    cursor = _Cursor(content)
    if _match(cursor, containers, False) < len(containers):
        return 0
    position, column = cursor.next_nonspace()
    rest = content[position:].rstrip(" \t")
    if column - cursor.column >= 4 or "-" not in rest or _UNDERLINE.match(rest) or _LIST_MARKER.match(rest):
        return 0
    return delimiter_row_cells(rest)
