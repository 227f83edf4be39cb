"""Sentence splitting of one paragraph: pysbd behind guard rails, with a regex fallback.

Guard rails, in order:

1. a paragraph never holds a line break (the format readers split paragraphs first);
2. a paragraph longer than ``PARAGRAPH_MAX_CHARS`` is pre-cut at likely sentence ends;
3. text with pysbd's reserved placeholder characters, or with the digit runs that make its
   regexes backtrack exponentially, goes straight to the fallback splitter;
4. pysbd runs in a helper process with a timeout (see ``producer.pysbd_process``);
5. pysbd's pieces must join back to the paragraph exactly (pysbd can drop text, #57),
   otherwise the fallback splitter is used.

The result is a list of ``(start, end)`` spans, each a sentence without surrounding
whitespace; the whitespace between them is left to the caller as passthrough.
"""

from __future__ import annotations

import bisect
import itertools
import re
import unicodedata
from collections.abc import Sequence
from typing import NamedTuple

from producer import defaults, pysbd_process
from producer.protect import URL_START, strip_span

Span = tuple[int, int]

_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc e.g i.e al fig figs no nos vol pp p cf approx dept est "
    "inc ltd co corp jan feb mar apr jun jul aug sep sept oct nov dec u.s u.k u.n a.m p.m".split()
)
_FALLBACK_BOUNDARY = re.compile(
    # .!? before a non-lower-case word: a run of them is matched whole, from its start, and
    # never given back (backtracking into a run of dots, from each of them, was quadratic)
    r"(?<![.!?…])[.!?…]++[\"'”’)\]]*+(?=\s+[\"'“‘(\[]?(?![a-z])\S)"
    r"|[。！？]+[”’」）]*"  # CJK sentence ends
)
#: Anything that can end a sentence or a list item ("1) first 2) second") before the last
#: character; a paragraph without one is a single sentence and pysbd is not asked.
_INNER_TERMINATOR = re.compile(r"[.!?…。！？;:\r)]")
_BRACKET_RUN = re.compile(rf"[.∯]\[[\d,\s-]{{{defaults.PYSBD_BRACKET_RUN_LIMIT},}}")
#: A URL starts where `producer.protect`'s does (``URL_START``), where a dotted word starts:
#: a scheme looked for from every letter of a long word ("a." * 20000) took quadratic time
#: (six seconds); it is read to the end of its word.
#: An e-mail address starts a word and is found whole, every ``@`` in it (``a@b@c.com``): each
#: part before an ``@`` is taken for good, as \S+@\S+ took cubic time on a long word of ``@``s
#: without a dot (ten seconds for 3,000 characters). An address is read with its path
#: (``a@b.com/x``, ``git@github.com:user/repo.git``), as `producer.protect` reads it.
_URL = re.compile(
    rf"(?<![\w.+-]){URL_START}\S+"
    r"|(?<!\S)@*+(?:[^\s@]+@+)++[^\s@]+\.\w+(?:[/:]\S*)?"
)


def needs_translation(text: str) -> bool:
    """Whether ``text`` holds words to translate: some letter outside URLs and e-mail addresses."""
    return any(unicodedata.category(c).startswith("L") for c in _URL.sub("", text))


class Sentences(NamedTuple):
    """How `split_paragraph` split a paragraph."""

    spans: list[Span]  # its sentences, stripped of surrounding whitespace
    #: where a sentence was cut for length, not at a sentence end: a paragraph longer than
    #: ``PARAGRAPH_MAX_CHARS`` with no likely sentence end in a stretch of that length is cut
    #: at its last space (or anywhere); the sentences on either side of such a cut are pieces
    #: of one sentence
    length_cuts: list[int]


def split_paragraph(text: str, protected: Sequence[Span] = ()) -> Sentences:
    """The sentences of one paragraph (no line breaks), and where it was cut for length;
    its pre-cuts are found once for both.

    No sentence ends inside one of the ``protected`` spans (sorted, not overlapping): two
    sentences that a protected span straddles are one.
    """
    cuts = _cuts(text, defaults.PARAGRAPH_MAX_CHARS)
    bounds = [0, *(cut for cut, _ in cuts), len(text)]
    spans: list[Span] = []
    for start, end in itertools.pairwise(bounds):
        spans.extend((start + s, start + e) for s, e in _split_chunk(text[start:end]))
    return Sentences(_join_across(spans, protected), [cut for cut, at_end in cuts if not at_end])


def split_sentences(text: str, protected: Sequence[Span] = ()) -> list[Span]:
    """Sentence spans of one paragraph (`split_paragraph`'s)."""
    return split_paragraph(text, protected).spans


def _join_across(spans: list[Span], protected: Sequence[Span]) -> list[Span]:
    """``spans`` with each pair of neighbours that a protected span straddles joined."""
    starts = [start for start, _ in protected]
    joined: list[Span] = []
    for start, end in spans:
        if joined:
            k = bisect.bisect_left(starts, joined[-1][1]) - 1  # last span starting before
            if k >= 0 and protected[k][1] > start:
                joined[-1] = (joined[-1][0], end)
                continue
        joined.append((start, end))
    return joined


def fallback_split(text: str) -> list[Span]:
    """Regex sentence splitter: ends at ``.!?`` before a word not in lower case, or at ``。！？``.

    Skips periods after known abbreviations and single-letter initials.
    """
    spans: list[Span] = []
    start = 0
    for match in _FALLBACK_BOUNDARY.finditer(text):
        if match.group().startswith(".") and _is_abbreviation(text, match.start()):
            continue
        spans.append((start, match.end()))
        start = match.end()
    spans.append((start, len(text)))
    return [span for span in (strip_span(text, s, e) for s, e in spans) if span is not None]


def _is_abbreviation(text: str, dot: int) -> bool:
    token = _word_before(text, dot).lower()
    return token in _ABBREVIATIONS or (len(token) == 1 and token.isalpha())


def _word_before(text: str, end: int) -> str:
    """The run of word characters and dots that ends at ``end`` in ``text``, found walking
    back from ``end``: a regex search for it tried every position before ``end`` (quadratic
    time on a long paragraph)."""
    start = end
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "._"):
        start -= 1
    return text[start:end]


def touches(text: str, span: Span, cuts: list[int]) -> bool:
    """Whether only whitespace lies between ``span`` and one of ``cuts`` (in increasing order)
    in ``text``. Only the nearest cut on either side can be such a one, so only those two are
    looked at (every cut was, each with a slice of the text between: quadratic)."""
    start, end = span
    after = bisect.bisect_left(cuts, end)
    before = bisect.bisect_right(cuts, start) - 1
    return (after < len(cuts) and not text[end : cuts[after]].strip()) or (
        before >= 0 and not text[cuts[before] : start].strip()
    )


def _cuts(text: str, limit: int) -> list[tuple[int, bool]]:
    """Cut positions making chunks of at most ``limit`` characters, and whether each one is
    at a likely sentence end."""
    cuts: list[tuple[int, bool]] = []
    start = 0
    while len(text) - start > limit:
        window = text[start : start + limit]
        ends = [e for _, e in fallback_split(window)[:-1]]
        cut = ends[-1] if ends else window.rfind(" ") + 1 or limit
        start += cut
        cuts.append((start, bool(ends)))
    return cuts


def _split_chunk(chunk: str) -> list[Span]:
    stripped = strip_span(chunk, 0, len(chunk))
    if stripped is None:
        return []
    lead, tail = stripped
    body = chunk[lead:tail]
    if not _INNER_TERMINATOR.search(body[:-1]):
        return [stripped]  # no sentence end before the last character: one sentence
    spans = _pysbd_spans(body)
    if spans is None:
        spans = fallback_split(body)
    return [(lead + s, lead + e) for s, e in spans]


def _pysbd_spans(body: str) -> list[Span] | None:
    """pysbd's sentences for ``body`` if pysbd is safe to ask and its pieces join back exactly."""
    if not defaults.PYSBD_RESERVED_CHARS.isdisjoint(body) or _BRACKET_RUN.search(body):
        return None
    raw = pysbd_process.shared().spans(body)
    if not raw:
        return None
    position = 0
    for start, end in raw:
        if start != position or end <= start:
            return None  # a gap, an overlap or a repeat: pysbd lost or duplicated text
        position = end
    if position != len(body):
        return None
    return [span for span in (strip_span(body, s, e) for s, e in raw) if span is not None]
