"""Quality flags: what a reviewer should look at, computed from a sentence and its translation.

Flags never change a translation; they only name what looks wrong (`FLAGS`, in report order):

- ``length_cap``: the decoder stopped at the length cap (`models.defaults.LENGTH_A`), almost
  always a repetition loop;
- ``repeat``: the output repeats a short unit four times or more in a row (`_has_loop`);
- ``digits``: the numbers of source and output differ (`number_strings` says which count);
- ``copied``: the source is English (mostly Latin script) and so is the output;
- ``ratio``: the output/source length ratio is outside `defaults.RATIO_BAND` (words kept
  as they are, such as names and code, left out of both lengths);
- ``split``: the segmenter cut the sentence for length (`producer.segment.Sentences`).

`FlagLog` counts the flags of every sentence of a run and writes one JSON record per flagged
sentence to a report file.
"""

from __future__ import annotations

import bisect
import json
import re
import shutil
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from tempfile import SpooledTemporaryFile
from typing import TextIO

from producer import defaults
from producer.documents import Document
from producer.layout import Segment

FLAGS = ("length_cap", "repeat", "digits", "copied", "ratio", "split")

_LOOP = re.compile(
    rf"([^\s\d]{{1,{defaults.REPEAT_MAX_UNIT}}}?)(?:\s*\1){{{defaults.REPEAT_MIN_TIMES - 1},}}"
)
_LETTER = re.compile(r"[^\W\d_]")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_NUMBER = re.compile(r"\d+(?:\.\d+)*")
_MONTH_DAY = re.compile(r"(\d{1,2})月")
_MONTH_NAME = re.compile(
    r"\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t|tember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b",
    re.IGNORECASE,
)
#: A Latin name or token kept in a translation; Latin classes, not \w, which would run on into
#: the CJK characters written against it ("使用Kubernetes和").
_KEPT = re.compile(
    r"[A-Za-z0-9\u00c0-\u024f][A-Za-z0-9\u00c0-\u024f_.-]*[A-Za-z0-9\u00c0-\u024f_]|[A-Za-z0-9]"
)
_NEWLINE = re.compile("\n")
_LATIN_WORD = re.compile(r"[A-Za-z\u00c0-\u024f]+")
_IDEOGRAPH = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff]")


def flags(source: str, output: str, *, hit_length_cap: bool = False, split: bool = False) -> list[str]:
    """The quality flags of one translated sentence, in `FLAGS` order (empty when none)."""
    found = {
        "length_cap": hit_length_cap,
        "repeat": _has_loop(output),
        "digits": number_strings(source, english=True)
        != number_strings(output, english=False, source=source),
        "copied": mostly_latin(source) and mostly_latin(output),
        "ratio": _ratio_out_of_band(source, output),
        "split": split,
    }
    return [name for name in FLAGS if found[name]]


def _has_loop(text: str) -> bool:
    return any(_LETTER.search(match.group(1)) for match in _LOOP.finditer(text))


def number_strings(text: str, *, english: bool, source: str = "") -> Counter[str]:
    """The numbers of ``text`` that a translation must keep, as a multiset of digit strings.

    Full-width digits count as ASCII ones and thousands separators are dropped ("1,000" is
    "1000"); a decimal or version number ("2.13.0") is one string. Whole numbers up to
    `defaults.DIGITS_IGNORED_MAX` are left out (they may be written in characters). In an
    output (``english`` False) a month number before 月 is left out when ``source`` names
    the month ("May 3" -> "5月3日").
    """
    # Thousands separators go before NFKC, which would make a full-width comma between two
    # numbers ("45，120") a separator ("45,120").
    text = unicodedata.normalize("NFKC", _THOUSANDS.sub("", text))
    if not english and _MONTH_NAME.search(source):
        text = _MONTH_DAY.sub(lambda m: "月" if int(m.group(1)) <= 12 else m.group(), text)
    return Counter(
        number
        for number in _NUMBER.findall(text)
        if "." in number or int(number) > defaults.DIGITS_IGNORED_MAX
    )


def mostly_latin(text: str) -> bool:
    """Whether ``text`` has more words in Latin script than Chinese characters (and some)."""
    words = len(_LATIN_WORD.findall(text))
    return words > 0 and words > len(_IDEOGRAPH.findall(text))


def _ratio_out_of_band(source: str, output: str) -> bool:
    """Lengths in characters other than whitespace, leaving out on both sides the words and
    numbers that the output keeps as they are in the source (names, code, versions)."""
    source_words = set(_KEPT.findall(source))
    kept = sum(len(word) for word in _KEPT.findall(output) if word in source_words)
    source_chars = _visible(source) - kept
    if source_chars < defaults.RATIO_MIN_SOURCE_CHARS:
        return False
    low, high = defaults.RATIO_BAND
    return not low <= (_visible(output) - kept) / source_chars <= high


def _visible(text: str) -> int:
    return sum(not c.isspace() for c in text)


#: Where a sentence starts in its document, as a flag record gives it: ``{"line": n}``, or
#: for a Parquet cell ``{"row": r, "column": name}`` (``r`` counted from 0, as pandas does).
Place = dict[str, int | str]


def segment_places(document: Document, first_line: int = 1) -> Callable[[Segment], Place]:
    """Where in ``document`` (a window starting at ``first_line``) a segment starts: its line,
    or the row and column of its cell for a Parquet row group's (``Document.places``)."""
    places = document.places
    if places is not None:
        return lambda segment: {"row": places[segment.index][0], "column": places[segment.index][1]}
    text = document.render([s.text for s in document.segments])
    newlines = [match.start() for match in _NEWLINE.finditer(text)]
    return lambda segment: {"line": first_line + bisect.bisect_left(newlines, segment.start)}


def place_text(name: str, place: Place) -> str:
    """``name`` and ``place`` as messages give a position: ``notes.md:12``, or
    ``t.parquet: row 3 (0-based), column 'text'``."""
    if "line" in place:
        return f"{name}:{place['line']}"
    return f"{name}: row {place['row']:,} (0-based), column {place['column']!r}"


class FlagLog:
    """Counts the flags of a run's sentences and writes each flagged one to ``out`` as JSONL.

    A record: ``{"document", "path", "line", "source", "output", "flags"}``: the document as
    the run names it, and (files only) its resolved absolute path, which a later run matches
    records by (`cli.common.open_report`); ``line`` is the line of the document where the
    sentence starts, counting from ``first_line`` (for a cell of a Parquet file, ``row`` and
    ``column`` instead: `Place`).

    Documents are checked one at a time, a window after another (`check`), and what is found
    stays pending until the document is written (`keep`: its flags are counted and its
    records go to ``out``) or not (`drop`): a document that fails part way leaves no record
    of the translations that were never written. Pending records wait in a temporary file
    past `defaults.PENDING_RECORDS_BYTES`, so a big document's are never all in memory.
    """

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out
        self.counts: Counter[str] = Counter()
        self._found: Counter[str] = Counter()
        self._records: SpooledTemporaryFile[str] | None = None

    def check(
        self,
        name: str,
        document: Document,
        translations: Sequence[str],
        capped: Callable[[int], bool],
        first_line: int = 1,
        skip: Callable[[int], bool] = lambda index: False,
        path: str | None = None,
    ) -> None:
        """Flag each segment of ``document`` (a window of the document called ``name``, the
        file at ``path`` if it is one) against its translation, pending `keep` or `drop`.

        ``capped(i)`` says whether segment ``i``'s translation hit the length cap; segments
        for which ``skip(i)`` holds (left untranslated for another reason) are not checked.
        """
        place: Callable[[Segment], Place] | None = None
        for segment, output in zip(document.segments, translations, strict=True):
            if skip(segment.index):
                continue
            found = flags(segment.text, output, hit_length_cap=capped(segment.index), split=segment.split)
            if not found:
                continue
            self._found.update(found)
            if self.out is None:
                continue
            if place is None:  # only once a record is written: it renders the document
                place = segment_places(document, first_line)
            record = {
                "document": name,
                **({"path": path} if path is not None else {}),
                **place(segment),
                "source": segment.text,
                "output": output,
                "flags": found,
            }
            if self._records is None:
                self._records = SpooledTemporaryFile(
                    defaults.PENDING_RECORDS_BYTES, "w+", encoding="utf-8", newline=""
                )
            self._records.write(json.dumps(record, ensure_ascii=False) + "\n")

    def keep(self) -> None:
        """The document checked since the last `keep` or `drop` was written: count its flags
        and write its records to ``out``."""
        self.counts.update(self._found)
        if self._records is not None and self.out is not None:
            self._records.seek(0)
            shutil.copyfileobj(self._records, self.out)
            self.out.flush()
        self.drop()

    def drop(self) -> None:
        """The document checked since the last `keep` or `drop` was not written: forget what
        was found in it."""
        self._found.clear()
        if self._records is not None:
            self._records.close()
            self._records = None

    def summary(self) -> str:
        """The counts per flag, e.g. ``3 length_cap, 1 digits`` ('' when none)."""
        return ", ".join(f"{self.counts[name]} {name}" for name in FLAGS if self.counts[name])
