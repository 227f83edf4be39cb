"""Inline Markdown: which parts of a paragraph are text to translate and which are markup.

Markup is either *wrapping* (emphasis delimiters, and link brackets with their targets,
paired up) or *breaking* (code spans, autolinks, inline HTML, bare URLs, table cell pipes and
escaped pipes, footnote references, image brackets with their targets, and wrapping markup
left without its pair). Text on either side of wrapping markup stays one sentence; breaking
markup ends a run of text (so an image's alt text is translated on its own).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

#: A bare URL's end: a backtick starts a code span; parentheses are the URL's own only in
#: balanced pairs (https://en.wikipedia.org/wiki/Python_(language)), which it may end with
_URL_END = (
    r"(?:[^\s<>()`]|\([^\s<>()`]*\))*"
    r"(?:[^\s<>().,;:!?'\"*_~`]|\([^\s<>()`]*\))"
)
#: A bare URL (in `_INLINE`, with a parenthesis around exactly it, "(https://x.org/a)": its
#: halves were left to the model with the words on either side, which it dropped, as
#: `producer.protect` reads one; a parenthesis around more, "(see https://x.org/a)", is prose)
_BARE_URL = r"(?:(?:https?|ftp)://|www\.)" + _URL_END
#: A template tag in a link target: {{ site.baseurl }}/x. It holds no other tag's opening,
#: so that each ``{{`` is looked at once, not searched to the end of the line again.
_TEMPLATE = r"\{\{(?:(?!\{\{).)*?\}\}|\{%(?:(?!\{%).)*?%\}"
_INLINE = (
    r"(?P<escape>\\[!-/:-@\[-`{-~])"
    r"|(?P<code>(?:(?<!`)|(?<=\\`))(?P<ticks>`+)(?!`).+?(?<!`)(?P=ticks)(?!`))"  # whole runs only
    r"|(?P<autolink><(?:[A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*|[^\s<>@]+@[^\s<>]+)>)"
    r"|(?P<comment><!--)|(?P<html></?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*?)?/?>)"  # see markup
    r"|(?P<image>!\[)"
    r"|(?P<link_end>\]\((?:" + _TEMPLATE + r"|[^()\s]|\([^()\s]*\))*+"  # possessive: a
    # template is also so many characters, and backtracking tried both, 2**n ways
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\)"
    r"|\]\[[^\]]*\]|\])"
    r"|(?P<footnote>\[\^[^\]\s]+\])"
    r"|(?P<bracket>\[)"
    r"|(?P<url>\(" + _BARE_URL + r"\)|" + _BARE_URL + r")"
    r"|(?P<emphasis>\*+|(?<!\w)_+|_+(?!\w)|~~)"
)
_MARKUP = re.compile(_INLINE)
_COMMENT = re.compile(r"(?P<html><!--.*?-->)")
_MARKUP_IN_TABLE = re.compile(_INLINE + r"|(?P<pipe>\|)")

Span = tuple[int, int]
Pair = tuple[Span, Span]


def markup(text: str, start: int, end: int, table: bool = False) -> Iterator[re.Match[str]]:
    """The inline markup of ``text[start:end]`` in order (backslash escapes stay text);
    in a table row (``table``), cell pipes too, and escaped pipes (``\\|``, a pipe in a
    cell's text), which a model may give back without their backslash, a cell more."""
    pattern = _MARKUP_IN_TABLE if table else _MARKUP
    position = start
    closing: int | None = None  # the first "-->" after the last comment opening (-1: none)
    while match := pattern.search(text, position, end):
        position = match.end()
        if match.lastgroup == "comment":  # an HTML comment: up to the first "-->", if any,
            # searched for once for all the openings before it (a regex searched to the end
            # of the line for each: quadratic in a line of unclosed openings)
            if closing is None or 0 <= closing < position:
                closing = text.find("-->", position, end)
            if closing < 0:
                position = match.start() + 1
                continue
            match = _COMMENT.match(text, match.start(), closing + 3)
            position = match.end()
        if match.lastgroup != "escape" or (table and match.group() == "\\|"):
            yield match


def pair_markup(matches: Sequence[re.Match[str]]) -> list[Pair]:
    """The wrapping pairs among ``matches``: an emphasis delimiter with the next equal one,
    a ``[`` with the link end that closes it. Openers left between the two sides of a pair,
    an image's ``![`` and the link end closing it, and every other match pair with nothing."""
    pairs: list[Pair] = []
    open_at: list[int] = []  # the openers left, in order
    place: dict[int, int] = {}  # an opener's place in open_at, while it is there
    # the openers each closer may close, last on top; ones no longer in open_at are skipped
    # (popped) when met, so that each is looked at once (scanning open_at was quadratic)
    candidates: dict[str, list[int]] = {}
    for i, match in enumerate(matches):
        kind = match.lastgroup
        if kind in ("emphasis", "link_end"):
            stack = candidates.get(match.group() if kind == "emphasis" else "[", [])
            while stack and not (
                place.get(stack[-1], -1) < len(open_at) and open_at[place[stack[-1]]] == stack[-1]
            ):
                stack.pop()
            if stack:
                k = stack.pop()
                if matches[k].lastgroup != "image":
                    pairs.append((matches[k].span(), match.span()))
                del open_at[place[k] :]
                continue
        if kind in ("emphasis", "bracket", "image"):
            place[i] = len(open_at)
            open_at.append(i)
            candidates.setdefault(match.group() if kind == "emphasis" else "[", []).append(i)
    return pairs
