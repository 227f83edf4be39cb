"""Markdown: translate the text of paragraphs, headings, lists, quotes and tables only.

A line-based block scanner: YAML/TOML front matter, fenced and indented code, HTML blocks,
link reference definitions, thematic breaks and table delimiter rows pass through whole.
Other lines lose their container markup (quote markers, list markers, heading hashes) to
passthrough, and the rest is split into text and inline markup by
``producer.formats.markdown_inline``. Consecutive lines of one paragraph are read as one
paragraph, so sentences hard-wrapped across lines are translated whole; so are sentences
with emphasis, links and images, whose markup is sent to the model without the markup and
put back around the translation (`producer.layout.Mark`).

A big file is parsed a window at a time (``producer.streaming``): `cuts` tells where the
scanner reads a blank line outside any block, or is about to read a heading, list item or
table row, and the state it carries past that place, which a window starting there is
scanned with (`build`'s ``start``). So that the scanner needs no more of a file than a
window to find them, front matter is looked for only at the start of a file and must close
within ``FRONT_MATTER_MAX_CHARS``, and a blank line ends indented code (indented lines after
it are a code block of their own, passed through alike).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from producer import defaults
from producer.formats.lines import Line, split_lines
from producer.formats.markdown_inline import markup, pair_markup
from producer.layout import LayoutBuilder

_MARKER = r"(?P<marker>(?P<bullet>[-*+]|\d{1,9}[.)])(?:[ \t]+|$)(?:\[[ xX]\][ \t]+)?|\[\^[^\]]+\]:[ \t]*)?"
_CONTAINER = re.compile(r"(?P<quote>(?:[ ]{0,3}>[ ]?)*)[ \t]*" + _MARKER)
#: The same, for a line in a list item whose first quote marker is indented past the item's
#: text (`_container` tells when): that far, and no more than 3 columns past it.
_ITEM_CONTAINER = re.compile(r"(?P<quote>[ \t]*>[ ]?(?:[ ]{0,3}>[ ]?)*)[ \t]*" + _MARKER)
_HEADING = re.compile(r"#{1,6}(?:[ \t]+|$)")
_FENCE = re.compile(r"(`{3,}|~{3,})")
_RULE = re.compile(r"[ ]{0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_UNDERLINE = re.compile(r"[ ]{0,3}(?:=+|-+)[ \t]*$")  # of a setext heading: after a paragraph line
#: A definition's destination and optional title, and nothing else on the line.
_DESTINATION = (
    r"(?P<destination><[^<>\n]*>|[^\s<]\S*)"
    r"(?:[ \t]+(?P<title>\"[^\"]*\"?|'[^']*'?|\([^()]*\)?))?[ \t]*$"
)
#: A link reference definition (not a footnote, ``[^1]:``): a label, a destination, and an
#: optional title (which may go on to the next lines, or start on the next one), and nothing
#: else on the line; or the label alone, its destination on the next line (see
#: `_reference_end`).
_REFERENCE = re.compile(r"[ ]{0,3}\[(?!\^)[^\]]+\]:[ \t]*(?:" + _DESTINATION + r"|$)")
#: The next line of a definition whose label is alone on its line.
_NEXT_LINE_DESTINATION = re.compile(r"[ \t]*" + _DESTINATION)
_TITLE_START = re.compile(r"[ \t]*[\"'(]")
_TITLE_CLOSER = {'"': '"', "'": "'", "(": ")"}
#: A line that may start a block other than a paragraph or be a table's delimiter row, and
#: so cannot go on a title (read broadly: a title that meets one is no title, and its lines
#: are a paragraph's).
_INTERRUPTS = re.compile(r"[ \t]*(?:[#>*+\-_=|:`~<]|\d{1,9}[.)])")
_TABLE_DELIMITER = re.compile(r"[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
_HTML_BLOCK_TAGS = (
    "address|article|aside|blockquote|body|center|details|dialog|dd|div|dl|dt|fieldset|"
    "figcaption|figure|footer|form|h[1-6]|head|header|hr|html|iframe|legend|li|link|main|menu|"
    "nav|ol|p|section|summary|table|tbody|td|tfoot|th|thead|title|tr|ul|video|audio|picture"
)
#: HTML blocks that end at a blank line: CommonMark's type 6 (a block-level tag), which may
#: interrupt a paragraph, and type 7 (any other tag alone on its line), which may not.
_HTML_BLOCK_TAG = re.compile(rf"[ ]{{0,3}}</?(?:{_HTML_BLOCK_TAGS})(?:[\s/>]|$)", re.IGNORECASE)
_HTML_TAG_LINE = re.compile(r"[ ]{0,3}</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>[ \t]*$")  # \s+ was quadratic
_BLANK_LINE = re.compile(r"[ \t]*$")
_QUOTE_MARKER = re.compile(r"[ ]{0,3}>[ ]?")
_HTML_UNTIL_MARKER = (
    (
        re.compile(r"[ ]{0,3}<(?:script|pre|style|textarea)(?:[\s>]|$)", re.I),
        re.compile(r"</(?:script|pre|style|textarea)>", re.I),
    ),
    (re.compile(r"[ ]{0,3}<!--"), re.compile(r"-->")),
    (re.compile(r"[ ]{0,3}<\?"), re.compile(r"\?>")),
    (re.compile(r"[ ]{0,3}<![A-Z]"), re.compile(r">")),
    (re.compile(r"[ ]{0,3}<!\[CDATA\["), re.compile(r"\]\]>")),
)


@dataclass(frozen=True)
class _TextLine:
    """A line with translatable content at ``start..end`` (after its container markup).

    ``kind`` is "text" (a paragraph line), "item" (a list item's first line), "heading" or
    "table" (a table row, whose cells are separate units). ``quote_depth`` is that of the
    line's quote markers, or for a line going on a paragraph, the paragraph's (deeper for a
    lazy continuation line, quoted less than the paragraph).
    """

    start: int
    end: int
    quote_depth: int
    kind: str


@dataclass(frozen=True)
class Cut:
    """A place where a Markdown file may be cut into windows that are parsed on their own,
    ``end`` (an offset in the text scanned), and the state the block scanner carries past it
    to the next line: whether the line before was blank, whether a table is open, and the
    column of the text of the list item the lines after it may still belong to (None
    outside a list), whether the line before was a paragraph's (which a link reference
    definition cannot interrupt), and the quote depth of that list item (a line quoted less,
    other than a lazy paragraph line, is out of the list).

    A cut comes after a blank line that the scanner reads outside any block (no paragraph,
    fenced or indented code, HTML block or front matter open), and before a heading, list
    item or table row, which never continue the paragraph before them, unless the line
    before is a table header (the scanner knows it for one by looking at this line)."""

    end: int
    previous_blank: bool
    in_table: bool
    list_indent: int | None
    in_paragraph: bool = False
    list_depth: int = 0


def build(builder: LayoutBuilder, start: Cut | None = None) -> None:
    """Lay out ``builder.source`` as Markdown: the start of a file (front matter looked for),
    or with ``start`` the text after that cut of a file."""
    paragraph: list[_TextLine] = []
    for line in _scan(builder.source, start):
        if isinstance(line, _TextLine) and paragraph and _continues(paragraph[-1], line):
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
    if start is None and not complete and _front_matter_open(text):
        return
    for line in _scan(text, start):
        if isinstance(line, Cut) and line.end > 0:  # not before the first line
            yield line


def _continues(last: _TextLine, line: _TextLine) -> bool:
    """Whether ``line`` continues the paragraph that ``last`` belongs to."""
    return line.kind == "text" and last.kind in ("text", "item") and line.quote_depth == last.quote_depth


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


def _scan(text: str, start: Cut | None) -> Iterator[_TextLine | Cut | None]:
    """Yield a ``_TextLine`` per line with text, a ``Cut`` after each blank line read outside
    any block and before each heading, list item or table row that does not need the line
    before it, and None for each other passthrough line or block. ``start``: see `build`."""
    lines = list(split_lines(text))
    i = 0 if start is not None else _front_matter_end(text, lines)
    if i:
        yield None
    start = start or Cut(0, True, False, None)
    previous_blank, in_table = start.previous_blank, start.in_table
    list_indent = start.list_indent  # column of the current list item's text
    list_depth = start.list_depth  # how many quotes the list is in
    after_header = False  # the line before was a table header, found by looking at this one
    in_paragraph = start.in_paragraph  # a definition cannot interrupt a paragraph
    # the quote depth of the open paragraph: a quote deeper than it interrupts it, and may
    # open with code. (A window starting in a paragraph starts at a heading, item or table
    # row, which no scan of the whole file read as code: none is deeper than "any".)
    paragraph_depth = len(text)
    empty_item = False  # the line before opened a list item with no text
    while i < len(lines):
        here = Cut(lines[i].start, previous_blank, in_table, list_indent, in_paragraph, list_depth)
        content = lines[i].content(text)
        blank = not content.strip()
        nested = False  # the line opens a list item whose text opens a quote or another item
        while True:
            indent = _width(content[: len(content) - len(content.lstrip())])  # a tab later is no part of it
            container = _container(content, None if list_depth else list_indent)
            depth, column = _text_column(content, container)
            if depth < list_depth and not blank and not in_paragraph:  # the list's quote ended
                list_indent, list_depth = None, 0
            if (
                list_indent is not None
                and depth > list_depth
                and not _in_item(content, list_indent, list_depth)
            ):
                list_indent, list_depth = None, 0  # a quote opened left of the item's text: no lazy line
            # a line quoted less than the list (a lazy one) is indented from its own quote's text
            item_indent = list_indent if list_indent is not None and depth >= list_depth else 0
            code_indent = item_indent + 4
            if depth:  # code in a quote is indented 4 columns past its marker's optional space
                quote = container.group("quote")
                code_indent = max(item_indent, len(quote) + (not quote.endswith(" "))) + 4
                code_column = column if content[len(quote) :].strip() else 0
            else:
                code_column = indent
            item_column, item_code = _item(content, container) if container.group("marker") else (0, False)
            if nested or not _opens_nested(content, container, item_code or code_column >= code_indent):
                break
            # read once more with the marker as spaces, in the item it opens (no paragraph is
            # open in it): its quote or item is then read as on the item's next lines
            list_indent, list_depth, in_paragraph, nested = item_column, depth, False, True
            bullet = container.end("bullet")
            content = (
                content[: container.start("bullet")]
                + " " * (bullet - container.start("bullet"))
                + content[bullet:]
            )
        fence = _fence(content[container.end() :].lstrip())
        # an HTML block may open in a list item or a quote too, where any tag alone on its
        # line opens one at the start of the item or of a quote deeper than the paragraph
        opens_container = (
            nested or bool(container.group("marker")) or (in_paragraph and depth > paragraph_depth)
        )
        html_end = (
            _html_block_end(content[container.end() :], fresh=previous_blank or opens_container)
            if code_column < code_indent
            else None
        )
        # a definition cannot interrupt a paragraph (but may open a quote or a list item that
        # does), nor a table (a line with a pipe is its row); it is read after the markers
        in_row = in_table and "|" in content
        interrupts = in_paragraph and not opens_container
        definition = None if interrupts or in_row else _REFERENCE.match(content, container.end())
        header = paragraph_line = opened_empty = False
        outdented = not blank and indent < (list_indent or 0)  # left of the list item's text
        if empty_item and not content[len(container.group("quote")) :].strip():
            list_indent, list_depth = None, 0  # an item opened by a blank line ends at another
        if blank:
            in_table = False
            yield Cut(lines[i].stop, True, False, list_indent, list_depth=list_depth)
        elif code_column >= code_indent and not in_table and (not in_paragraph or depth > paragraph_depth):
            # code cannot interrupt a paragraph (but a deeper quote can) or a table
            i = _skip_indented_code(text, lines, i, code_indent, depth, None if list_depth else list_indent)
            yield None
        elif item_code and code_column < code_indent:  # a list item opened by indented code
            if not after_header:
                yield here
            list_indent, list_depth, outdented = item_column, depth, False
            i = _skip_indented_code(text, lines, i, item_column + 4, depth, None if depth else list_indent)
            yield None
        elif fence and code_column < code_indent:  # indented further, it goes on a paragraph
            if container.group("marker"):  # a list item opened by the fence
                list_indent, list_depth, outdented = item_column, depth, False
            item = (list_indent, list_depth) if list_indent is not None and not outdented else (0, 0)
            i = _skip_fence(text, lines, i, fence.group(1), depth, item)
            yield None
        elif html_end is not None:
            if container.group("marker"):  # a list item opened by the HTML block
                list_indent, list_depth, outdented = item_column, depth, False
            item = (list_indent, list_depth) if list_indent is not None and not outdented else (0, 0)
            i = _skip_html(text, lines, i, html_end, container.end(), depth, item)
            yield None
        elif _RULE.match(content) or (in_paragraph and not outdented and _UNDERLINE.match(content)):
            # (a line left of a list item's text underlines no paragraph in it: it is no
            # lazy continuation; "  -" there opens the next item)
            yield None
        elif code_column < code_indent and _RULE.match(content, container.end()):  # in a quote or item
            if container.group("marker"):  # a list item opened by the break
                list_indent, list_depth, outdented = item_column, depth, False
            yield None
        elif definition and (definition_end := _reference_end(text, lines, i, definition, depth)) is not None:
            if container.group("marker"):  # a list item opened by the definition
                list_indent, list_depth, outdented = item_column, depth, False
            i = definition_end
            yield None
        elif not content[container.end() :].strip() and not container.group("marker"):
            yield None  # quote markers alone (">"): a blank line inside the quote
        elif in_row or _is_table_header(text, lines, i):
            header = not in_row
            in_table = True
            if not after_header:
                yield here
            yield _TextLine(lines[i].start + container.end(), lines[i].end, 0, "table")
        else:
            line = _text_line(lines[i], content, container)
            if nested and line.kind == "text":  # the first line of the item, in its quote
                line = replace(line, kind="item")
            continued = in_paragraph and line.kind == "text"
            paragraph_depth = max(paragraph_depth, depth) if continued else depth
            if continued:  # a line quoted less goes on the paragraph lazily, in its quote
                line = replace(line, quote_depth=paragraph_depth)
            if not after_header and line.kind != "text":
                yield here
            yield line
            # a list item with no text on its line opens no paragraph: what follows it is no
            # lazy continuation, and may be code
            opened_empty = line.kind == "item" and line.end <= line.start
            paragraph_line = line.kind != "heading" and not opened_empty
            if container.group("marker"):
                list_indent, list_depth, outdented = item_column, depth, False
            elif in_paragraph and line.kind == "text":
                outdented = False  # a lazy continuation line: the item's paragraph goes on
        if outdented:
            list_indent, list_depth = None, 0  # any other line left of the item's text ends the list
        previous_blank, after_header, in_paragraph, empty_item = blank, header, paragraph_line, opened_empty
        i += 1


def _fence(rest: str) -> re.Match[str] | None:
    """The opening code fence at the start of ``rest``; a backtick fence's info string holds
    no backtick (```js``` starts a paragraph with a code span, as in CommonMark)."""
    fence = _FENCE.match(rest)
    if fence and fence.group(1)[0] == "`" and "`" in rest[fence.end() :]:
        return None
    return fence


def _opens_nested(content: str, container: re.Match[str], code: bool) -> bool:
    """Whether ``content`` (a line matched by ``_CONTAINER``) opens a list item whose text
    opens a quote or another list item (``- > text``, ``1. - text``), unless the line is
    code (``code``) or a thematic break, or its item's text is one (``- - -``, ``- * * *``)."""
    marker = container.group("marker")
    if not marker or container.group("bullet") is None or "[" in marker or code:
        return False
    if _RULE.match(content) or _RULE.match(content, container.end()):
        return False
    inner = _CONTAINER.match(content, container.end())
    return bool(inner.group("quote") or inner.group("bullet"))


def _item(content: str, container: re.Match[str]) -> tuple[int, bool]:
    """The column where the text of the list item opened on ``content`` (a line matched by
    ``_CONTAINER``, with a marker) starts, and whether the item opens with indented code:
    after a marker followed by nothing, or by five columns of spaces and tabs or more (the
    code's indentation), the item's text starts one column past the marker (CommonMark)."""
    if container.group("bullet") is None:  # a footnote definition
        return _width(content[: container.end()]), False
    bullet = container.end("bullet")
    rest = content[bullet:].lstrip(" \t")
    marker_column = _width(content[:bullet])
    if rest and _width(content[: len(content) - len(rest)]) - marker_column < 5:
        return _width(content[: container.end()]), False
    return marker_column + 1, bool(rest)


def _reference_end(
    text: str, lines: Sequence[Line], i: int, definition: re.Match[str], depth: int = 0
) -> int | None:
    """Index of the last line of the link reference definition matched on line ``i``, inside
    ``depth`` quotes, or None if it is none: a title left open on its line must close on a
    line after it (and be all that is left there), else the line is text; a line after a
    definition without a title that is one (in full) is the definition's. The lines after
    line ``i`` are read after ``depth`` quote markers. A label alone on line ``i`` needs its
    destination on the next line, which may not start another block nor hold a pipe."""
    if definition.group("destination") is None:
        following = _unquote(lines[i + 1].content(text), depth) if i + 1 < len(lines) else ""
        destination = _NEXT_LINE_DESTINATION.match(following)
        if destination is None or _INTERRUPTS.match(following) or "|" in following:
            return None
        return _reference_end(text, lines, i + 1, destination, depth)
    title = definition.group("title")
    if title is None:
        if i + 1 < len(lines):
            following = _unquote(lines[i + 1].content(text), depth)
            opening = _TITLE_START.match(following)
            if opening and "|" not in following:
                end = _title_end(text, lines, i + 1, opening.end(), _TITLE_CLOSER[opening.group()[-1]], depth)
                return i if end is None else end
        return i
    if len(title) > 1 and title[-1] == _TITLE_CLOSER[title[0]]:
        return i
    return _title_end(
        text, lines, i, len(_unquote(lines[i].content(text), depth)), _TITLE_CLOSER[title[0]], depth
    )


def _title_end(
    text: str, lines: Sequence[Line], j: int, start: int, closer: str, depth: int = 0
) -> int | None:
    """Index of the line closing a link title with ``closer``, looked for from ``start`` of
    line ``j`` (after ``depth`` quote markers, as every line after it) on, with nothing but
    spaces after it; None if a blank line, a line after line ``j`` that may start another
    block or holds a table's pipe, another opening parenthesis, text after the closer or the
    end of the text comes first. (Read so, a window ending in a title finds no place to cut
    in the paragraph it reads there instead.)"""
    for k in range(j, len(lines)):
        content = _unquote(lines[k].content(text), depth)
        position = start if k == j else 0
        if not content.strip() or (k > j and (_INTERRUPTS.match(content) or "|" in content)):
            return None
        end = content.find(closer, position)
        if closer == ")" and "(" in content[position : None if end < 0 else end]:
            return None
        if end >= 0:
            return k if not content[end + 1 :].strip() else None
    return None


def _text_line(line: Line, content: str, container: re.Match[str]) -> _TextLine:
    depth = container.group("quote").count(">")
    heading = _HEADING.match(content, container.end())
    if heading:
        end = _heading_end(content, heading.end())
        return _TextLine(line.start + heading.end(), line.start + end, depth, "heading")
    kind = "item" if container.group("marker") else "text"
    return _TextLine(line.start + container.end(), line.start + len(content.rstrip()), depth, kind)


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


def _is_table_header(text: str, lines: Sequence[Line], i: int) -> bool:
    if i + 1 >= len(lines) or "|" not in lines[i].content(text):
        return False
    delimiter = lines[i + 1].content(text)
    delimiter = delimiter[len(_CONTAINER.match(delimiter).group("quote")) :]  # a table in a quote
    return "-" in delimiter and bool(_TABLE_DELIMITER.match(delimiter))


def _front_matter_end(text: str, lines: Sequence[Line]) -> int:
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


def _front_matter_open(text: str) -> bool:
    """Whether ``text``, the start of a file, opens front matter that more of the file may
    still close."""
    lines = list(split_lines(text))
    opens = bool(lines) and lines[0].content(text).rstrip() in ("---", "+++")
    return opens and len(text) < defaults.FRONT_MATTER_MAX_CHARS and not _front_matter_end(text, lines)


def _width(text: str) -> int:
    return len(text.expandtabs(4))


def _skip_indented_code(
    text: str, lines: Sequence[Line], i: int, indent: int, depth: int, item: int | None
) -> int:
    """Index of the last line of the code block indented ``indent`` columns from line ``i``
    (inside ``depth`` quotes, in the list item ``item`` of `_container`): up to a blank line
    (in the quote too) or a line indented less or quoted otherwise. (Indented lines after a
    blank line start another code block, laid out the same: passed through. So a blank line
    is never inside indented code, and a window can be cut after it.)"""
    for j in range(i + 1, len(lines)):
        content = lines[j].content(text)
        container = _container(content, item)
        depth_j, column = _text_column(content, container)
        blank = not content[len(container.group("quote")) :].strip()
        if blank or depth_j != depth or column < indent:
            return j - 1
    return len(lines) - 1


def _container(content: str, item: int | None) -> re.Match[str]:
    """``content`` matched by ``_CONTAINER``, or by ``_ITEM_CONTAINER`` where it is in the
    list item (in no quote) whose text starts at column ``item`` (None: none) and its first
    quote marker is indented 0 to 3 columns past that column: a quote in the item."""
    container = _CONTAINER.match(content)
    if item and not container.group("quote"):
        rest = content.lstrip(" \t")
        indent = _width(content[: len(content) - len(rest)])
        if rest.startswith(">") and item <= indent < item + 4:
            return _ITEM_CONTAINER.match(content)
    return container


def _text_column(content: str, container: re.Match[str]) -> tuple[int, int]:
    """The quote depth of ``content`` (a line matched by ``_CONTAINER``) and the column where
    its text starts after its quote markers and the spaces and tabs after them."""
    quote = container.group("quote")
    rest = content[len(quote) :]
    return quote.count(">"), _width(content[: len(content) - len(rest.lstrip(" \t"))])


def _skip_fence(
    text: str, lines: Sequence[Line], i: int, fence: str, depth: int, item: tuple[int, int]
) -> int:
    """Index of the line closing the fence opened at line ``i`` (or the last line), inside
    ``depth`` quotes and the list item ``item`` (`_in_item`): a line quoted less, or with
    text left of the item's, ends the quote or the item, and so the fence, as CommonMark's
    containers do."""
    closing = re.compile(re.escape(fence[0]) + f"{{{len(fence)},}}[ \\t]*$")
    for j in range(i + 1, len(lines)):
        content = lines[j].content(text)
        container = _container(content, None if item[1] else item[0])
        if container.group("quote").count(">") < depth or not _in_item(content, *item):
            return j - 1
        if closing.match(content[container.end() :].lstrip()):
            return j
    return len(lines) - 1


def _html_block_end(rest: str, fresh: bool) -> re.Pattern[str] | None:
    """For a line whose text after its container markup (``rest``) opens an HTML block, the
    pattern of the block's last line; else None. Comments, `<script>` and the like and
    block-level tags open one after any line (they interrupt a paragraph); any other tag
    alone on its line only where it interrupts none, ``fresh`` (after a blank line, or at
    the start of a list item or of a quote)."""
    for start, end in _HTML_UNTIL_MARKER:
        if start.match(rest):
            return end
    opens = _HTML_BLOCK_TAG.match(rest) or (fresh and _HTML_TAG_LINE.match(rest))
    return _BLANK_LINE if opens else None


def _skip_html(
    text: str,
    lines: Sequence[Line],
    i: int,
    end: re.Pattern[str],
    start: int,
    depth: int,
    item: tuple[int, int],
) -> int:
    """Index of the last line of the HTML block opened at ``start`` (an index) of line ``i``,
    inside ``depth`` quotes and the list item ``item`` (`_in_item`): a line quoted less, or
    with text left of the item's, ends the quote or the item, and so the block, as
    CommonMark's containers do; a blank line in the quote ends a block that ends at one."""
    for j in range(i, len(lines)):
        content = lines[j].content(text)
        if j > i:
            rest = _unquote(content, depth)
            quoted = _container(content, None if item[1] else item[0]).group("quote").count(">")
            if quoted < depth or not _in_item(content, *item):
                return j - 1
            if end is _BLANK_LINE and not rest.strip():
                return j - 1
        if end is not _BLANK_LINE and end.search(content, start + 4 if j == i else 0):
            return j
    return len(lines) - 1


def _in_item(content: str, column: int, depth: int) -> bool:
    """Whether ``content`` is blank or goes on the list item whose text starts at ``column``
    (0 outside a list) inside ``depth`` quotes: its text, after that many quote markers,
    starts at that column or right of it."""
    rest = _unquote(content, depth)
    return not rest.strip() or _width(content[: len(content) - len(rest.lstrip(" \t"))]) >= column


def _unquote(content: str, depth: int) -> str:
    """``content`` after its first ``depth`` quote markers (and the optional space after each)."""
    position = 0
    for _ in range(depth):
        marker = _QUOTE_MARKER.match(content, position)
        if not marker:
            break
        position = marker.end()
    return content[position:]
