"""The layout of a document: passthrough text and translation slots, and how to render it.

A format reader walks its document and hands the builder passthrough text and paragraphs;
the builder splits paragraphs into sentences (``producer.segment``) and records, in order:

- ``str``: passthrough text, copied to the output unchanged;
- ``Slot``: one sentence, replaced by its translation;
- ``Gap``: the spaces between two sentences of one paragraph (with any line break and
  line-continuation markup there);
- ``Encoded``: a nested layout whose rendering is re-encoded (a JSON string value, or a
  CSV/TSV cell: ``producer.cells``).

Rendering rules:

- a slot whose translation equals its sentence text is rendered as the original source text
  (which may differ from the sentence text where the sentence spans a line break);
- a gap is dropped when the sentence before it was translated (its translation differs from
  the source) into text ending in a CJK character or CJK punctuation: Chinese joins sentences
  without spaces, and a paragraph that was hard-wrapped becomes one line. Otherwise it is kept.

Together these make rendering the sentence texts themselves reproduce the input exactly.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from producer.cells import encode
from producer.protect import is_target_language, protected_spans, unprotected
from producer.segment import needs_translation, split_paragraph, touches


class DocumentError(ValueError):
    """A document that cannot be read; the message names the file and position."""


@dataclass(frozen=True, slots=True)
class Segment:
    """One sentence to translate, with its character offsets in the original document text."""

    index: int
    text: str
    start: int
    end: int
    split: bool = False  # cut for length by the segmenter (`producer.segment.Sentences`)


@dataclass(frozen=True, slots=True)
class Mark:
    """Inline markup inside a sentence, sent to the model without it: ``opening`` and
    ``closing`` around the text ``inner`` (either side may be empty, for markup whose pair
    lies in another sentence)."""

    opening: str
    inner: str
    closing: str

    @property
    def is_link(self) -> bool:
        """Whether this is a whole link or image (``[text](target)``), which cannot hold another."""
        return bool(self.opening) and self.closing.startswith("]")

    def fits(self, translation: str) -> bool:
        """Whether ``inner`` occurs exactly once in ``translation`` (it was kept as it was)."""
        return bool(self.inner) and translation.count(self.inner) == 1

    def apply(self, translation: str) -> str:
        """``translation`` with the markup around ``inner`` where it `fits`, else around the
        whole translation."""
        if self.fits(translation):
            return translation.replace(self.inner, self.opening + self.inner + self.closing)
        return self.opening + translation + self.closing


@dataclass(frozen=True, slots=True)
class Slot:
    """The place of segment ``index`` in the output; ``source`` is its original text, and
    ``marks`` the inline markup that the segment text was sent without (innermost first)."""

    index: int
    source: str
    marks: tuple[Mark, ...] = ()


@dataclass(frozen=True, slots=True)
class Gap:
    """Whitespace (and line-continuation markup) between two sentences of one paragraph."""

    text: str


@dataclass(frozen=True, slots=True)
class Encoded:
    """An encoded value (``codec``: see ``producer.cells``): render ``parts``; if unchanged,
    emit ``raw``, else re-encode."""

    raw: str
    value: str
    parts: tuple[Part, ...]
    codec: str = "json"


Part = str | Slot | Gap | Encoded

#: What may lie between two sentences for it to be a `Gap`: whitespace, but for tabs, the
#: line and page breaks that are protected spans (`producer.protect`) and the unit separator
#: (U+001F, a control character that Python counts as whitespace): a space, a no-break
#: space after an HTML full stop, an ideographic space.
_SPACES = re.compile(r"[^\S\t\r\x0b\x0c\x1c-\x1f\x85\u2028\u2029]*")
Pair = tuple[tuple[int, int], tuple[int, int]]


class LayoutBuilder:
    """Builds the parts of ``source`` front to back, appending sentences to ``segments``.

    ``offset`` maps a position in ``source`` to a position in the document text (they differ
    for the decoded value of a JSON string). ``protect`` holds the user's protected-span
    patterns, added to the built-in ones (`producer.protect`).
    """

    def __init__(
        self,
        source: str,
        segments: list[Segment],
        offset: Callable[[int], int] = lambda position: position,
        protect: tuple[str, ...] = (),
    ) -> None:
        self.source = source
        self.protect = protect
        self.segments = segments
        self.offset = offset
        self.parts: list[Part] = []
        self.cursor = 0

    def keep(self, end: int) -> None:
        """Pass ``source[cursor:end]`` through unchanged."""
        if end > self.cursor:
            self._append(self.source[self.cursor : end])
            self.cursor = end

    def paragraph(self, pieces: Sequence[tuple[int, int]], pairs: Sequence[Pair] = ()) -> None:
        """Translate the text of ``pieces`` (line-free spans, in order) as one paragraph.

        The source between pieces on different lines (line breaks, quote markers,
        indentation) is read as a single space, between pieces of one line (inline markup)
        as nothing; text before the first piece is passed through. ``pairs`` are the spans
        of inline markup wrapping text (``**``…``**``, ``[``…``](url)``): those inside a
        sentence become its ``Slot.marks``. A sentence already in
        the target language is passed through; protected spans are passed through and the
        text on either side of one is translated separately.
        """
        pieces = [(s, e) for s, e in pieces if e > s]
        if not pieces:
            return
        logical, starts = self._join(pieces)
        indexed = _PairIndex(pairs, pieces)
        protected = protected_spans(logical, self.protect)
        sentences, cuts = split_paragraph(logical, protected)
        sentence_end = None  # where the sentence just laid out ended, if it ended in a slot
        for start, end in sentences:
            if is_target_language(logical[start:end]):
                sentence_end = None
                continue
            for piece_start, piece_end in unprotected(logical, start, end, protected):
                text = logical[piece_start:piece_end]
                if not needs_translation(text):
                    sentence_end = None
                    continue
                split = bool(cuts) and touches(logical, (start, end), cuts)
                # only spaces (any but a tab, and the line breaks read as one) may be a gap:
                # the paragraph's own text, such as a protected span starting this sentence,
                # never is
                gap = sentence_end is not None and bool(_SPACES.fullmatch(logical, sentence_end, piece_start))
                self._slot(pieces, starts, indexed, text, piece_start, piece_end, gap, split)
                sentence_end = piece_end if piece_end == end else None

    def _slot(
        self,
        pieces: Sequence[tuple[int, int]],
        starts: list[int],
        pairs: _PairIndex,
        text: str,
        start: int,
        end: int,
        after_sentence: bool,
        split: bool,
    ) -> None:
        """Record ``text`` (at ``start..end`` of the joined paragraph) as the next segment;
        ``after_sentence``: only spaces separate it from the sentence before, in the
        paragraph's text; ``split``: its sentence was cut for length."""
        source_start = self._to_source(pieces, starts, start)
        source_end = self._to_source(pieces, starts, end - 1) + 1
        between = self.source[self.cursor : source_start]
        if after_sentence and not pairs.side_within(self.cursor, source_start):
            self.parts.append(Gap(between))  # only spaces and line breaks lie between two sentences
        else:
            self._append(between)
        index = len(self.segments)
        self.segments.append(Segment(index, text, self.offset(source_start), self.offset(source_end), split))
        source = self.source[source_start:source_end]
        marks = self._marks(pairs, source_start, source_end)
        self.parts.append(Slot(index, text if source == text else source, marks))  # one copy, mostly
        self.cursor = source_end

    def _marks(self, pairs: _PairIndex, start: int, end: int) -> tuple[Mark, ...]:
        """The marks of the markup in ``source[start:end]``, in the order they are applied: a
        pair inside it wraps the text between (innermost first); then each side whose pair
        lies outside wraps the whole sentence."""
        marks, sides = [], []
        for (open_start, open_end), (close_start, close_end) in pairs.with_side_within(start, end):
            opens, closes = start <= open_start < end, start <= close_start < end
            inner = [
                (max(s, open_end), min(e, close_start)) for s, e in pairs.pieces_within(open_end, close_start)
            ]
            marks.append(
                Mark(
                    self.source[open_start:open_end] if opens else "",
                    self._join(inner)[0] if opens and closes else "",
                    self.source[close_start:close_end] if closes else "",
                )
            )
        return (*marks, *sides)

    def encoded(self, end: int, raw: str, value: str, parts: Sequence[Part], codec: str = "json") -> None:
        """Replace ``source[cursor:end]`` (``raw``, encoding ``value``) by a nested layout."""
        self.keep(end - len(raw))
        self.parts.append(Encoded(raw, value, tuple(parts), codec))
        self.cursor = end

    def finish(self) -> list[Part]:
        """Pass the rest of the source through and return the parts."""
        self.keep(len(self.source))
        return self.parts

    def _join(self, pieces: Sequence[tuple[int, int]]) -> tuple[str, list[int]]:
        starts, texts, length = [], [], 0
        for i, (start, end) in enumerate(pieces):
            if i and "\n" in self.source[pieces[i - 1][1] : start]:
                texts.append(" ")
                length += 1
            starts.append(length)
            texts.append(self.source[start:end])
            length += end - start
        return "".join(texts), starts

    @staticmethod
    def _to_source(pieces: Sequence[tuple[int, int]], starts: list[int], position: int) -> int:
        k = bisect.bisect_right(starts, position) - 1
        return pieces[k][0] + position - starts[k]

    def _append(self, text: str) -> None:
        if not text:
            return
        if self.parts and isinstance(self.parts[-1], str):
            self.parts[-1] += text
        else:
            self.parts.append(text)


class _PairIndex:
    """A paragraph's wrapping markup ``pairs`` (in `producer.formats.markdown_inline.pair_markup`
    order) and text ``pieces``, indexed by position: each sentence looks up its own in
    logarithmic time, not by a scan of the paragraph's (quadratic in a paragraph of many
    lines with markup)."""

    def __init__(self, pairs: Sequence[Pair], pieces: Sequence[tuple[int, int]]) -> None:
        self.pairs = pairs
        self.pieces = pieces
        sides = sorted((start, k) for k, pair in enumerate(pairs) for start, _ in pair)
        self.side_starts = [start for start, _ in sides]
        self.side_pairs = [k for _, k in sides]
        self.piece_starts = [start for start, _ in pieces]
        self.piece_ends = [end for _, end in pieces]

    def side_within(self, start: int, end: int) -> bool:
        """Whether a side of a pair starts in ``start..end``."""
        i = bisect.bisect_left(self.side_starts, start)
        return i < len(self.side_starts) and self.side_starts[i] < end

    def with_side_within(self, start: int, end: int) -> list[Pair]:
        """The pairs with a side starting in ``start..end``, in their order."""
        i, j = bisect.bisect_left(self.side_starts, start), bisect.bisect_left(self.side_starts, end)
        return [self.pairs[k] for k in sorted(set(self.side_pairs[i:j]))]

    def pieces_within(self, start: int, end: int) -> Sequence[tuple[int, int]]:
        """The pieces that overlap ``start..end``, in order."""
        i, j = bisect.bisect_right(self.piece_ends, start), bisect.bisect_left(self.piece_starts, end)
        return self.pieces[i:j]


def render(parts: Sequence[Part], segments: Sequence[Segment], translations: Sequence[str]) -> str:
    """The output text: ``parts`` with each slot replaced by its translation."""
    out: list[str] = []
    drop_gap = False
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, Gap):
            if not drop_gap:
                out.append(part.text)
        elif isinstance(part, Slot):
            translation = translations[part.index]
            changed = translation != segments[part.index].text
            out.append(_marked(translation, part.marks) if changed else part.source)
            drop_gap = changed and ends_in_cjk(translation)
        else:
            value = render(part.parts, segments, translations)
            out.append(part.raw if value == part.value else encode(part.codec, value, part.raw))
    return "".join(out)


def _marked(translation: str, marks: Sequence[Mark]) -> str:
    """``translation`` with ``marks`` applied, innermost first. A link cannot hold another, so
    once a link wraps the whole translation, or is in it, a later link that does not `fit` is
    appended after the translation with its own text, not wrapped around it all: a sentence
    with two links keeps both targets, as valid Markdown."""
    appended: list[str] = []
    linked = wrapped = False
    for mark in marks:
        if mark.is_link and (wrapped or (linked and not mark.fits(translation))):
            appended.append(mark.opening + mark.inner + mark.closing)
            continue
        if mark.is_link:
            linked, wrapped = True, wrapped or not mark.fits(translation)
        translation = mark.apply(translation)
    return translation + "".join(appended)


#: Closing quotes and the ellipsis, which Chinese shares with English: a text ending in them
#: is Chinese when what they close is.
_SHARED_CLOSING = "\u2018\u2019\u201c\u201d\u2026\"')"
_ASCII_ENDS = ".!?"


def ends_in_cjk(text: str) -> bool:
    """Whether ``text`` ends in a CJK ideograph, kana, hangul or CJK/full-width punctuation,
    possibly followed by closing quotes or an ellipsis (``他说：“我饿了。”``), or by the
    ASCII sentence ends a model may write there (``车站在哪里?``, ``快一点!``)."""
    text = text.rstrip(_SHARED_CLOSING)
    stripped = text.rstrip(_ASCII_ENDS)
    if stripped != text:
        text = stripped.rstrip(_SHARED_CLOSING)
    if not text:
        return False
    code = ord(text[-1])
    return (
        0x2E80 <= code <= 0x9FFF  # radicals, CJK punctuation, kana, ideographs
        or 0xAC00 <= code <= 0xD7AF  # hangul
        or 0xF900 <= code <= 0xFAFF  # compatibility ideographs
        or 0xFF00 <= code <= 0xFFEF  # full-width forms
        or 0x20000 <= code <= 0x3FFFF  # ideograph extensions
    )
