"""The layout of a document: passthrough text and translation slots, and how to render it.

A format reader walks its document and hands the builder passthrough text and paragraphs;
the builder splits paragraphs into sentences (``producer.segment``) and records, in order:

- ``str``: passthrough text, copied to the output unchanged;
- ``Slot``: one sentence, replaced by its translation;
- ``Gap``: the whitespace between two sentences of one paragraph;
- ``Encoded``: a nested layout whose rendering is re-encoded (a JSON string value).

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
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from producer.segment import length_cuts, needs_translation, split_sentences, touches


class DocumentError(ValueError):
    """A document that cannot be read; the message names the file and position."""


@dataclass(frozen=True, slots=True)
class Segment:
    """One sentence to translate, with its character offsets in the original document text."""

    index: int
    text: str
    start: int
    end: int
    split: bool = False  # cut for length by the segmenter (`producer.segment.length_cuts`)


@dataclass(frozen=True, slots=True)
class Slot:
    """The place of segment ``index`` in the output; ``source`` is its original text."""

    index: int
    source: str


@dataclass(frozen=True, slots=True)
class Gap:
    """Whitespace (and line-continuation markup) between two sentences of one paragraph."""

    text: str


@dataclass(frozen=True, slots=True)
class Encoded:
    """A JSON string value: render ``parts``; if unchanged, emit ``raw``, else re-encode."""

    raw: str
    value: str
    parts: tuple[Part, ...]


Part = str | Slot | Gap | Encoded


class LayoutBuilder:
    """Builds the parts of ``source`` front to back, appending sentences to ``segments``.

    ``offset`` maps a position in ``source`` to a position in the document text (they differ
    for the decoded value of a JSON string).
    """

    def __init__(
        self,
        source: str,
        segments: list[Segment],
        offset: Callable[[int], int] = lambda position: position,
    ) -> None:
        self.source = source
        self.segments = segments
        self.offset = offset
        self.parts: list[Part] = []
        self.cursor = 0

    def keep(self, end: int) -> None:
        """Pass ``source[cursor:end]`` through unchanged."""
        if end > self.cursor:
            self._append(self.source[self.cursor : end])
            self.cursor = end

    def paragraph(self, pieces: Sequence[tuple[int, int]]) -> None:
        """Translate the text of ``pieces`` (line-free spans, in order) as one paragraph.

        The source between pieces (line breaks, quote markers, indentation) is read as a
        single space; text before the first piece is passed through.
        """
        pieces = [(s, e) for s, e in pieces if e > s]
        if not pieces:
            return
        logical, starts = self._join(pieces)
        cuts = length_cuts(logical)
        previous_was_sentence = False
        for start, end in split_sentences(logical):
            text = logical[start:end]
            if not needs_translation(text):
                previous_was_sentence = False
                continue
            source_start = self._to_source(pieces, starts, start)
            source_end = self._to_source(pieces, starts, end - 1) + 1
            between = self.source[self.cursor : source_start]
            if previous_was_sentence:  # only whitespace lies between two sentences
                self.parts.append(Gap(between))
            else:
                self._append(between)
            index = len(self.segments)
            split = bool(cuts) and touches(logical, (start, end), cuts)
            self.segments.append(
                Segment(index, text, self.offset(source_start), self.offset(source_end), split)
            )
            source = self.source[source_start:source_end]
            self.parts.append(Slot(index, text if source == text else source))  # one copy, mostly
            self.cursor = source_end
            previous_was_sentence = True

    def encoded(self, end: int, raw: str, value: str, parts: Sequence[Part]) -> None:
        """Replace ``source[cursor:end]`` (the JSON string ``raw``) by a nested layout."""
        self.keep(end - len(raw))
        self.parts.append(Encoded(raw, value, tuple(parts)))
        self.cursor = end

    def finish(self) -> list[Part]:
        """Pass the rest of the source through and return the parts."""
        self.keep(len(self.source))
        return self.parts

    def _join(self, pieces: Sequence[tuple[int, int]]) -> tuple[str, list[int]]:
        starts, texts, length = [], [], 0
        for start, end in pieces:
            starts.append(length)
            texts.append(self.source[start:end])
            length += end - start + 1
        return " ".join(texts), starts

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
            out.append(translation if changed else part.source)
            drop_gap = changed and ends_in_cjk(translation)
        else:
            value = render(part.parts, segments, translations)
            out.append(part.raw if value == part.value else json.dumps(value, ensure_ascii=False))
    return "".join(out)


def ends_in_cjk(text: str) -> bool:
    """Whether ``text`` ends in a CJK ideograph, kana, hangul or CJK/full-width punctuation."""
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
