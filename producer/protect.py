"""Protected spans: text that is never sent to the model and comes back byte-identical.

Built in: URLs (with query strings and fragments), e-mail addresses, bare domains, template
tags (Liquid/Jinja/Handlebars ``{{ }}``, ``{% %}``, ``{# #}``), HTML entities, inline code in
backticks, runs of CJK characters (already in the target script), and line and page breaks
other than ``\n`` (which the readers split lines on). Users add patterns
(``--protect REGEX``, ``TRANSQUEUE_PROTECT``). Numbers are protected where they stand alone: a
piece of text without a letter is never translated (``needs_translation``).

`producer.layout` keeps each span as passthrough and translates the text on either side of
it separately (the demo model copies no placeholder token: see README "Protected spans");
`producer.segment` never ends a sentence inside a span.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence

from producer import defaults

Span = tuple[int, int]

_URL_END = r"[^\s<>\"'`]*[^\s<>\"'`.,;:!?)\]}*_]"
#: A path after a domain or an address (a@b.com/x, example.com/): a slash alone too, which
#: was left to the model with the text after it
_PATH = rf"(?:/(?:{_URL_END})?)?"
#: A port after a bare domain (example.com:8080), which went to the model with the text after
#: it: digits that end a word, not a user's password before an @ nor one field of a:b:c
_PORT = r"(?::[0-9]{1,5}(?![\w:@]))?"
_CJK = (  # radicals, kana, bopomofo, ideographs, hangul, compatibility ideographs
    r"\u2e80-\u2fdf\u3040-\u30ff\u3100-\u312f\u3190-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    r"\uac00-\ud7af\uf900-\ufaff"
)
_TAG = defaults.TEMPLATE_TAG_MAX_CHARS
#: An address-like run (address characters and @s: a@b.com@c) is protected whole or not at
#: all: a match of it (a URL, an address, a domain) starts where the run does, never inside
#: one, with the run's leading @s
_RUN_START = r"(?<![\w.+@-])@*+"
#: A URL's user and password after its scheme's :// (RFC 3986 userinfo: unreserved
#: characters, sub-delimiters, colons and percent escapes), read to its @: a quote in it
#: (https://u:it's@x.org) ended the URL, which a quote after the host still does
_USERINFO = r"(?:(?<=://)[\w\-.~!$&'()*+,;=:%]*+@)?"
#: Where a URL starts: a scheme (in any case: Https://), www., mailto:, or a protocol-relative
#: // before a dotted host (//cdn.example.com/x.js), not after a slash or a colon: "//"
#: alone, as in a comment, is prose. `producer.segment` finds URLs from the same starts.
URL_START = r"(?i:[a-z][a-z0-9+.-]*://|www\.|mailto:|(?<![/:])//(?=[a-z0-9-]+\.[a-z0-9]))"
#: A local part, read with every @ after it (a@b@ in a@b@c.com), and a dotted host
_LOCAL = r"(?:[\w.+-]+@+)"
_DOTTED = r"[\w-]+(?:\.[\w-]+)+"
#: A run of address characters and @s that may be protected on its own from its start: an
#: address (a@b.com), or a domain with any @s before it (@c.org)
_OWN_RUN = rf"@*+{_LOCAL}*+{_DOTTED}"
# Each pattern scans forward from a start only as far as one token (or one brace, one
# backtick), so a long line costs linear time, whatever it holds.
BUILT_IN = {
    "template": rf"\{{\{{\{{?[^{{}}]{{0,{_TAG}}}?\}}?\}}\}}"
    rf"|\{{%[^{{}}]{{0,{_TAG}}}?%\}}|\{{#[^{{}}]{{0,{_TAG}}}?#\}}",
    # a URL starts where its run starts, as an address does: one after an @ (a@www.b.com@c)
    # is part of an address-like run
    "url": _RUN_START + URL_START + _USERINFO + _URL_END,
    # the whole run of address characters, every @ in it (a@b@c.com), or nothing: a match
    # starting after an @ left the run's start ("a@") to the model; with its path (a@b.com/x),
    # or an scp-like git remote's after a colon (git@github.com:user/repo.git; a colon ending
    # a clause, "a@b.com: it", is prose)
    "email": _RUN_START + rf"{_LOCAL}++{_DOTTED}(?::{_URL_END}|{_PATH})",
    # a domain in a run with an @ after its start (b.com in a@b.com@c, or in b.com@c) is part
    # of an address-like run, which the e-mail pattern protects whole if it is an address.
    # So is one before a password and an @ (b.com:x@c or b.com:@c, a user b.com at a host c:
    # ":x@c" went to the model), unless the run after the colon is protected on its own, as
    # after a label (b.com:x@c.org, as Email:a@b.com: no part of it is sent).
    # Labels in any case (GitHub.com), the top-level domain in lower or upper case (.com,
    # .COM) but not capitalised: "big.It" is a sentence end with its space missing. Never
    # right after a scheme: a URL that its start rule refuses (a@https://x.org) is not
    # protected in part. With its port and path (example.com:8080/x)
    "domain": _RUN_START
    + rf"(?<!://)(?![\w.+-]*(?::(?!{_OWN_RUN})[\w.+-]*)?@)(?:[A-Za-z0-9-]+\.)+(?:"
    + defaults.PROTECTED_TLDS
    + "|"
    + defaults.PROTECTED_TLDS.upper()
    + r")\b(?![\w-])"
    + _PORT
    + _PATH,
    "entity": r"&(?:[A-Za-z][A-Za-z0-9]{1,31}|#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6});",
    # a whole run of one or two backticks, not escaped by a backslash, up to a whole run
    # of the same length (as in Markdown: `x`` and \``x`` are no code)
    "code": r"(?<![\\`])(?:``(?!`)[^`]*(?:`[^`]+)*``|`[^`]+`)(?!`)",
    "cjk": rf"[{_CJK}](?:[{_CJK}\u3000-\u303f\uff00-\uffef\s]*[{_CJK}\u3000-\u303f\uff01-\uffef])?",
    # line and page breaks other than \n, which ends a line (a lone \r, \v, \f, the
    # information separators, NEL, U+2028, U+2029): the model would drop them
    "break": r"[\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]+",
}


class ProtectError(ValueError):
    """A user pattern that is not a valid regular expression, or matches empty text."""


@functools.lru_cache(maxsize=32)
def compile_patterns(extra: tuple[str, ...] = (), source: str = "--protect") -> tuple[re.Pattern[str], ...]:
    """The user patterns ``extra`` and the built-in ones, compiled; ProtectError names a
    user pattern that is not a regular expression or that matches empty text, and where
    it came from (`source`)."""
    compiled = []
    for pattern in extra:
        try:
            user = re.compile(pattern)
        except re.error as error:
            raise ProtectError(f"{source} {pattern!r}: not a regular expression ({error})") from None
        if user.fullmatch(""):
            raise ProtectError(f"{source} {pattern!r}: matches empty text")
        compiled.append(user)
    return (*compiled, *_BUILT_IN)


def env_patterns() -> tuple[str, ...]:
    """TRANSQUEUE_PROTECT's patterns; ProtectError naming the variable for one that cannot
    be used (checked where a command starts, so that no file is read with it)."""
    compile_patterns(defaults.PROTECT_PATTERNS, source="TRANSQUEUE_PROTECT")
    return defaults.PROTECT_PATTERNS


def protected_spans(text: str, extra: tuple[str, ...] = ()) -> list[Span]:
    """The protected spans of ``text``, in order, not overlapping: where matches overlap, the
    one starting first wins, and of those the longest."""
    found = (
        _link_span(text, m) if pattern in _LINKS else m.span()
        for pattern in compile_patterns(extra)
        for m in pattern.finditer(text)
        if m.end() > m.start()
    )
    spans: list[Span] = []
    for start, negative_end in sorted((start, -end) for start, end in found):
        if not spans or start >= spans[-1][1]:
            spans.append((start, -negative_end))
    return spans


def unprotected(text: str, start: int, end: int, spans: Sequence[Span]) -> list[Span]:
    """The parts of ``text[start:end]`` outside ``spans`` (sorted), stripped of surrounding whitespace."""
    parts: list[Span] = []
    position = start
    for span_start, span_end in spans:
        if span_end <= position or span_start >= end:
            continue
        parts.append((position, span_start))
        position = span_end
    parts.append((position, end))
    return [span for span in (strip_span(text, s, e) for s, e in parts) if span is not None]


def strip_span(text: str, start: int, end: int) -> Span | None:
    """``start..end`` without the whitespace at either end, or None if nothing else is left."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def cjk_ratio(text: str) -> float:
    """The fraction of the letters of ``text`` that are CJK (Han, kana, hangul)."""
    letters = [c for c in text if unicodedata.category(c).startswith("L")]
    if not letters:
        return 0.0
    return sum(1 for c in letters if _IS_CJK.match(c)) / len(letters)


def is_target_language(text: str) -> bool:
    """Whether ``text`` is already mostly in the target script (copied, not translated)."""
    return cjk_ratio(text) > defaults.PASS_THROUGH_CJK_RATIO


_IS_CJK = re.compile(f"[{_CJK}]")
_BUILT_IN = tuple(re.compile(pattern) for pattern in BUILT_IN.values())
#: The pairs of characters kept with a link they enclose exactly
_ENCLOSING = frozenset({"()", "<>"})
#: The patterns whose match (a URL, an address's or a domain's path) may end in a ")" it opened
_LINKS = frozenset(_BUILT_IN[list(BUILT_IN).index(kind)] for kind in ("url", "email", "domain"))


def _link_span(text: str, match: re.Match[str]) -> Span:
    """The span of a URL, address or domain ``match``, taking in the ")"s right after it that
    close a "(" of its own (https://en.wikipedia.org/wiki/Python_(language)): a URL's last ")"
    is left out as prose, the end of a parenthesis around it, unless the URL opened it. A
    parenthesis or angle brackets around exactly the link, "(https://x.org/a)" or
    "<a@b.com>", are taken in whole (their halves went to the model with the words on either
    side, and came back without them); a parenthesis that holds more, "(see
    https://x.org/a)", is prose."""
    start, end = match.span()
    unclosed = text.count("(", start, end) - text.count(")", start, end)
    while unclosed > 0 and end < len(text) and text[end] == ")":
        unclosed -= 1
        end += 1
    if text[start - 1 : start] + text[end : end + 1] in _ENCLOSING:
        return start - 1, end + 1
    return start, end
