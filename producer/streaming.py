"""Streamed documents: every text file translated window by window, in bounded memory.

``transqueue translate``, ``submit`` and the inbox never read a text file whole: they read it
(``producer.inputs.stream_input``) in windows of about ``STREAM_WINDOW_BYTES``, parse each
window as a document of its own, exactly as its text would be parsed in the whole file, and
translate, render and write (or store) one window before reading the next. Memory is a few
windows, whatever the size of the file. Where a window may end depends on the format:

- a record file (``.txt`` one unit per line, ``.jsonl``, ``.csv``, ``.tsv``) after a whole
  record: a line, or for a table a line break outside quotes (a record may not be longer
  than the line limit);
- a Markdown file where no block is open (after a blank line outside any block, or before
  a heading, list item or table row), and a ``.txt`` with ``--reflow`` after a blank line
  (``producer.documents.window_cuts``): a window goes on until such a place comes, and a
  block or paragraph that the block limit (``Limits.block_bytes``) passes without one is
  refused.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from producer import defaults
from producer.documents import Document, ReadOptions, Resume, parse_text, window_cuts
from producer.files import write_atomic
from producer.formats import table
from producer.inputs import check_regular, decode_input, line_too_long, stream_input
from producer.layout import DocumentError


@dataclass(frozen=True)
class StreamedDocument:
    """A text file, parsed a window at a time by ``windows``."""

    path: Path
    fmt: str
    options: ReadOptions

    def windows(self) -> Iterator[Document]:
        """The documents of consecutive windows of the file; rendering each and joining the
        results gives what rendering the whole file as one document gives. DocumentError
        (naming file:line) or OSError as soon as the window that holds the problem is read."""
        if self.fmt == "md" or (self.fmt == "txt" and self.options.reflow):
            return self._block_windows()
        return self._record_windows()

    def write(self, target: Path, translate: Callable[[Document], list[str]], overwrite: bool = True) -> None:
        """Translate (``translate``: the translation of each segment of a document), render
        and append each window to ``target``'s temporary file, moved into place at the end
        (without ``overwrite``, only if ``target`` still does not exist: `write_atomic`)."""
        write_atomic(target, (window.render(translate(window)) for window in self.windows()), overwrite)

    def check(self) -> None:
        """DocumentError (or OSError) now, before anything is read, if the options cannot
        parse this format (a JSONL file without ``--field``, a table without ``--column``) or
        the file is not a regular file (``producer.inputs.check_regular``)."""
        self._parse("", 1, None)
        check_regular(self.path)

    def _record_windows(self) -> Iterator[Document]:
        """Windows of a record file, each cut after a whole record."""
        pending, first_line, resume = bytearray(), 1, None
        longer = False  # whether a table record went on past the last window tried
        for piece in stream_input(self.path, self.options.limits):
            pending += piece
            while cut := _window_end(pending, longer):
                text = decode_input(bytes(pending[:cut]), self.path, first_line)
                del pending[:cut]
                if self.fmt in defaults.DELIMITERS:
                    text, rest = self._whole_records(text, first_line)
                    pending[:0] = rest.encode("utf-8")
                    longer = not text
                    if longer:
                        break  # try again with all that is read once more has come
                yield self._parse(text, first_line, resume)
                resume = resume or Resume(header=self._header(text))
                first_line += text.count("\n")
        text = decode_input(bytes(pending), self.path, first_line)
        if text or first_line == 1:
            yield self._parse(text, first_line, resume)

    def _block_windows(self) -> Iterator[Document]:
        """Windows of a Markdown or ``--reflow`` text file, each cut where no block is open
        (`producer.documents.window_cuts`): the last such cut within ``STREAM_WINDOW_BYTES``
        characters, else the first one after."""
        pending, first_line, resume = bytearray(), 1, None
        for piece in stream_input(self.path, self.options.limits):
            pending += piece
            while len(pending) >= defaults.STREAM_WINDOW_BYTES:
                lines = pending.rfind(b"\n") + 1  # whole lines only
                text = decode_input(bytes(pending[:lines]), self.path, first_line)
                cuts = self._cuts(text, first_line, resume)
                if not cuts:
                    # A cut may still come before the last whole line: the scanner tells a
                    # table header by the line after it.
                    before_last = pending.rfind(b"\n", 0, max(lines - 1, 0)) + 1
                    if before_last > self.options.limits.block_bytes and not self._undecided(text, resume):
                        raise self._block_too_long(first_line)
                    break  # the window goes on: try again once more has come
                end, after = _nearest(cuts)
                yield self._parse(text[:end], first_line, resume)
                del pending[: len(text[:end].encode("utf-8"))]
                first_line += text.count("\n", 0, end)
                resume = after
        text = decode_input(bytes(pending), self.path, first_line)
        self._cuts(text, first_line, resume, final=True)
        if text or first_line == 1:
            yield self._parse(text, first_line, resume)

    def _cuts(
        self, text: str, first_line: int, resume: Resume | None, final: bool = False
    ) -> list[tuple[int, Resume]]:
        """The cuts of ``text`` (`producer.documents.window_cuts`); DocumentError where more than
        the block limit comes before one (or, ``final``, after the last)."""
        cuts = list(window_cuts(text, self.fmt, resume, final))
        ends = [end for end, _ in cuts]
        limit = self.options.limits.block_bytes
        for start, end in zip([0, *ends], ends + [len(text)] * final, strict=False):
            if (end - start) * 4 > limit and len(text[start:end].encode("utf-8")) > limit:
                raise self._block_too_long(first_line + text.count("\n", 0, start))
        return cuts

    def _undecided(self, text: str, resume: Resume | None) -> bool:
        """Whether ``text``, the start of a file, has no cut only because its front matter is
        still open (more of the file may close it: ``producer.formats.markdown.cuts``)."""
        return resume is None and any(window_cuts(text, self.fmt, None))

    def _block_too_long(self, line: int) -> DocumentError:
        """The error for a Markdown block or ``--reflow`` paragraph, from ``line`` on, that is
        longer than the block limit."""
        what = "paragraph" if self.fmt == "txt" else "Markdown block"
        limit = self.options.limits.block_bytes
        return DocumentError(
            f"{self.path}:{line}: {what} longer than {limit:,} bytes (TRANSQUEUE_MAX_BLOCK_BYTES)"
        )

    def _whole_records(self, text: str, first_line: int) -> tuple[str, str]:
        """``text`` cut after its last whole table record, and the rest; DocumentError when
        the unfinished record is longer than the line limit."""
        where = str(self.path)
        cut = table.record_end(text, defaults.DELIMITERS[self.fmt], where, first_line)
        limit = self.options.limits.line_bytes
        if (len(text) - cut) * 4 > limit and len(text[cut:].encode("utf-8")) > limit:  # bytes, not characters
            line = first_line + text.count("\n", 0, cut)
            raise line_too_long(where, line, limit, "record")
        return text[:cut], text[cut:]

    def _header(self, text: str) -> list[str] | None:
        if self.fmt not in defaults.DELIMITERS:
            return None
        return table.header_of(text, defaults.DELIMITERS[self.fmt], str(self.path))

    def _parse(self, text: str, first_line: int, resume: Resume | None) -> Document:
        return parse_text(text, self.fmt, self.options, self.path, first_line=first_line, resume=resume)


def _window_end(pending: bytearray, longer: bool = False) -> int:
    """Where the next window of ``pending`` ends (after a line break, about
    ``STREAM_WINDOW_BYTES`` in, or the last one if a record is ``longer`` than that), or 0
    while it is shorter than a window."""
    size = defaults.STREAM_WINDOW_BYTES
    if len(pending) < size:
        return 0
    if longer:
        return pending.rfind(b"\n") + 1
    return (pending.rfind(b"\n", 0, size) + 1) or (pending.find(b"\n", size) + 1)


def _nearest(cuts: Sequence[tuple[int, Resume]]) -> tuple[int, Resume]:
    """The last of ``cuts`` (in order, at least one) within ``STREAM_WINDOW_BYTES``, else the first."""
    within = bisect.bisect_right([end for end, _ in cuts], defaults.STREAM_WINDOW_BYTES)
    return cuts[max(within - 1, 0)]
