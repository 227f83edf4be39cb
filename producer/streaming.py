"""Streamed documents: record files translated window by window, in bounded memory.

A ``.txt`` (one unit per line, no ``--reflow``), ``.jsonl``, ``.csv`` or ``.tsv`` file, compressed
or not, is a sequence of records that are segmented independently of each other. So
``transqueue translate`` never reads one whole: it reads (``producer.inputs.stream_input``)
windows of about ``WINDOW_BYTES``, each cut after a whole record (a line; for a table, a line
break outside quotes), parses each window as a document of its own, exactly as the records
would be parsed in the whole file, and translates, renders and writes one window before
reading the next. Memory is a few windows, whatever the size of the file; the file limit
does not apply, the line limit does (and for a table, a record may not be longer).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from producer import defaults
from producer.documents import Document, ReadOptions, parse_text
from producer.files import write_atomic
from producer.formats import table
from producer.inputs import check_regular, decode_input, line_too_long, stream_input

#: The formats whose files are streamed (``.txt`` only without ``--reflow``).
STREAMED_FORMATS = ("txt", "jsonl", *defaults.DELIMITERS)


def is_streamed(fmt: str, options: ReadOptions) -> bool:
    """Whether a document of format ``fmt`` read with ``options`` is streamed."""
    return fmt in STREAMED_FORMATS and not (fmt == "txt" and options.reflow)


@dataclass(frozen=True)
class StreamedDocument:
    """A record file, parsed a window at a time by ``windows``."""

    path: Path
    fmt: str
    options: ReadOptions

    def windows(self) -> Iterator[Document]:
        """The documents of consecutive windows of the file; rendering each and joining the
        results gives what rendering the whole file as one document gives. DocumentError
        (naming file:line) or OSError as soon as the window that holds the problem is read."""
        pending, first_line, header = bytearray(), 1, None
        longer = False  # whether a table record went on past the last window tried
        for piece in stream_input(self.path, self.options.limits.line_bytes):
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
                yield self._parse(text, first_line, header)
                header = header if header is not None else self._header(text)
                first_line += text.count("\n")
        text = decode_input(bytes(pending), self.path, first_line)
        if text or first_line == 1:
            yield self._parse(text, first_line, header)

    def write(self, target: Path, translate: Callable[[Document], list[str]]) -> None:
        """Translate (``translate``: the translation of each segment of a document), render
        and append each window to ``target``'s temporary file, renamed into place at the end."""
        write_atomic(target, (window.render(translate(window)) for window in self.windows()))

    def check(self) -> None:
        """DocumentError (or OSError) now, before anything is read, if the options cannot
        parse this format (a JSONL file without ``--field``, a table without ``--column``) or
        the file is not a regular file (``producer.inputs.check_regular``)."""
        self._parse("", 1, None)
        check_regular(self.path)

    def _whole_records(self, text: str, first_line: int) -> tuple[str, str]:
        """``text`` cut after its last whole table record, and the rest; DocumentError when
        the unfinished record is longer than the line limit."""
        where = str(self.path)
        cut = table.record_end(text, defaults.DELIMITERS[self.fmt], where, first_line)
        if len(text) - cut > self.options.limits.line_bytes:
            line = first_line + text.count("\n", 0, cut)
            raise line_too_long(where, line, self.options.limits.line_bytes, "record")
        return text[:cut], text[cut:]

    def _header(self, text: str) -> list[str] | None:
        if self.fmt not in defaults.DELIMITERS:
            return None
        return table.header_of(text, defaults.DELIMITERS[self.fmt], str(self.path))

    def _parse(self, text: str, first_line: int, header: list[str] | None) -> Document:
        return parse_text(text, self.fmt, self.options, self.path, first_line=first_line, header=header)


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
