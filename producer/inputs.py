"""Reading inputs: the one way every path reads an input file, and stdin's line limit.

`stream_input` (a text file, in pieces) is used by `transqueue translate` and `transqueue
submit` (both through ``producer.streaming``) and the scheduled inbox scan, which hashes files
with `input_digest` (a Parquet file with `file_digest`, opened with `open_regular`). It reads
only regular files, a ``.gz`` or ``.zst`` one decompressed as it goes: a FIFO, socket or
device is refused by name without being opened for reading (a FIFO would block ``open()``,
``/dev/zero`` never ends). No file is read whole, and one whose decompressed bytes pass
``Limits.file_bytes`` is refused as they do. Lines are measured as the bytes arrive, and
reading stops at the first one over ``Limits.line_bytes``, so a file made of one endless
line costs about one line of memory and time before it fails. Symbolic
link loops and dangling links are OSErrors that say so. Each failure concerns one file:
callers report it (`failure`) and go on with the others.
"""

from __future__ import annotations

import codecs
import errno
import gzip
import hashlib
import os
import stat
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import BinaryIO

import zstandard

from producer import defaults
from producer.compression import compression_of, decompressing
from producer.layout import DocumentError

#: What each kind of file that is not a regular file is called in messages.
_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a directory",
}


@dataclass(frozen=True)
class Limits:
    """The largest input accepted, in bytes: a line (or stdin unit), a Markdown block or
    ``--reflow`` paragraph of a file (``producer.streaming``), and a file (decompressed)."""

    line_bytes: int = defaults.MAX_LINE_BYTES
    block_bytes: int = defaults.MAX_BLOCK_BYTES
    file_bytes: int = defaults.MAX_FILE_BYTES


def input_digest(path: Path, limits: Limits = Limits()) -> str:
    """The sha256 (hex) of the input file ``path``'s decompressed bytes, read in pieces with
    the errors of ``stream_input``, without holding the file."""
    digest = hashlib.sha256()
    for chunk in stream_input(path, limits):
        digest.update(chunk)
    return digest.hexdigest()


def stream_input(path: Path, limits: Limits = Limits()) -> Iterator[bytes]:
    """The (decompressed) bytes of the input file ``path`` (symbolic links followed) in pieces
    of about ``READ_CHUNK_BYTES``, without holding it.

    DocumentError for a file that is not a regular file, has a line longer than
    ``limits.line_bytes`` (naming file:line) or more bytes than ``limits.file_bytes``, as soon
    as the piece that shows it is read. OSError for a file that cannot be read, with a message
    that names a symbolic link loop or a dangling link as such.
    """
    with open_regular(path) as raw:
        lines, size, compression = _LineMeter(str(path), limits.line_bytes), 0, compression_of(path)
        with _decompression_errors(path):
            handle = decompressing(raw, compression)
            while chunk := handle.read(defaults.READ_CHUNK_BYTES):
                lines.feed(chunk)
                size += len(chunk)
                if size > limits.file_bytes:
                    raise DocumentError(f"{path}: {_over_file_limit(limits, compression)}")
                yield chunk
            if compression and not raw.tell():  # gzip and zstd read an empty file as no frames
                raise DocumentError(f"{path}: an empty file is not a valid {compression} stream")


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading, unbuffered, if it is a regular file (symbolic links
    followed): DocumentError for anything else, checked before it is opened (opening a FIFO
    would block) and again on what was opened, had it been swapped; OSError as ``stream_input``."""
    _check_file(path, _stat(path))
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    handle = open(descriptor, "rb", buffering=0)  # noqa: SIM115 - the caller closes it
    try:
        _check_file(path, os.fstat(descriptor))
    except DocumentError:
        handle.close()
        raise
    return handle


def file_digest(handle: BinaryIO) -> tuple[int, str]:
    """The size and sha256 (hex) of the bytes left in ``handle``, read in pieces."""
    digest, size = hashlib.sha256(), 0
    while chunk := handle.read(defaults.READ_CHUNK_BYTES):
        digest.update(chunk)
        size += len(chunk)
    return size, digest.hexdigest()


@contextmanager
def _decompression_errors(path: Path) -> Iterator[None]:
    """A corrupt or truncated ``.gz``/``.zst`` stream as a DocumentError naming ``path``."""
    try:
        yield
    except (gzip.BadGzipFile, EOFError, zlib.error, zstandard.ZstdError) as error:
        raise DocumentError(f"{path}: not a valid {compression_of(path)} stream ({error})") from None


def decode_input(data: bytes, where: str | Path, first_line: int = 1) -> str:
    """``data`` as UTF-8 text, line endings kept; DocumentError naming ``where``:line otherwise
    (``first_line``: the number of the line ``data`` starts with), and for the start of a
    file (``first_line`` 1) that is mostly NUL bytes (`refuse_nul_text`)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + first_line
        raise not_utf8(where, line, error, data if first_line == 1 else b"") from None
    if first_line == 1:
        refuse_nul_text(data, where)
    return text


def refuse_nul_text(start: bytes, where: str | Path) -> None:
    """DocumentError naming ``where`` if ``start``, the start of a file or stream, is a
    quarter or more NUL bytes: valid UTF-8, but UTF-16 without a byte order mark (ASCII text
    with a NUL after or before every character), or no text at all, which the model would be
    sent as garbage. Only the start is looked at, where such a file shows it: a text file
    ending in NUL padding (one cut short by a crash) is read as it is."""
    if start.count(0) * 4 >= len(start) > 0:
        line = start.count(b"\n", 0, start.index(0)) + 1
        raise DocumentError(
            f"{where}:{line}: mostly NUL bytes, which text does not hold: UTF-16 without a byte "
            "order mark (convert it: iconv -f UTF-16LE -t UTF-8), or not a text file"
        )


#: Byte order marks of the Unicode encodings other than UTF-8, longest first (UTF-32's
#: little-endian mark starts with UTF-16's).
_OTHER_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def not_utf8(where: str | Path, line: int, error: UnicodeDecodeError, start: bytes = b"") -> DocumentError:
    """The error for text that is not UTF-8 at ``line`` of ``where``; ``start``, the start of
    the file (or nothing), is looked at for the byte order mark of a UTF-16 or UTF-32 file,
    which the message then names, with how to convert it."""
    encoding = next((name for bom, name in _OTHER_BOMS if start.startswith(bom)), None)
    hint = ""
    if encoding and error.start < len(codecs.BOM_UTF32_LE):
        hint = f"; it starts with a {encoding} byte order mark: convert it (iconv -f {encoding} -t UTF-8)"
    return DocumentError(f"{where}:{line}: not valid UTF-8 ({error.reason}){hint}")


#: How messages and a job's records name stdin, which has no file name.
STDIN = "<stdin>"


def stdin_lines(stream: BinaryIO, max_line_bytes: int = defaults.MAX_LINE_BYTES) -> Iterator[bytes]:
    """The lines of ``stream`` (for ``producer.pipeline.stream_units``), none read longer than
    one byte over ``max_line_bytes``: a longer line comes in pieces, the first over the limit."""
    return iter(partial(stream.readline, max_line_bytes + 1), b"")


def _over_file_limit(limits: Limits, compressed: str) -> str:
    after = " once decompressed" if compressed else ""
    return f"larger than {limits.file_bytes:,} bytes{after} (TRANSQUEUE_MAX_FILE_BYTES)"


def line_too_long(where: str, line: int, limit: int, unit: str = "line") -> DocumentError:
    """The error for a line (or another stdin ``unit``) longer than ``limit`` bytes."""
    return DocumentError(f"{where}:{line}: {unit} longer than {limit:,} bytes (TRANSQUEUE_MAX_LINE_BYTES)")


def failure(path: Path | str, error: DocumentError | OSError) -> str:
    """How a file that could not be read or parsed is reported: ``path: reason``, or the
    DocumentError's own message, which names the file (and line) already."""
    if isinstance(error, DocumentError):
        return str(error)
    return f"{path}: {error.strerror or error}"


def _stat(path: Path) -> os.stat_result:
    """``os.stat(path)``, with the OSError of a link loop or a dangling link saying so."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        if not os.path.islink(path):
            raise
        target = os.readlink(path)
        raise FileNotFoundError(errno.ENOENT, f"dangling symbolic link to {target}", str(path)) from None
    except OSError as error:
        if error.errno != errno.ELOOP:
            raise
        raise OSError(errno.ELOOP, "symbolic link loop", str(path)) from None


def check_regular(path: Path) -> None:
    """DocumentError unless ``path`` is a regular file (symbolic links followed), as
    ``stream_input`` checks it, for a reader that opens files itself (Parquet)."""
    _check_file(path, _stat(path))


def _check_file(path: Path, status: os.stat_result) -> None:
    if not stat.S_ISREG(status.st_mode):
        kind = _KINDS.get(stat.S_IFMT(status.st_mode), "a special file")
        raise DocumentError(f"{path}: not a regular file ({kind}); not read")


class _LineMeter:
    """Measures the lines of a byte stream fed in pieces; raises at the first one too long.

    A line is the bytes between two ``\\n`` (a ``\\r`` before one counts). Each step looks for
    the last line break within one line's room of the current position, so whole runs of
    short lines are passed with one ``rfind`` and the work per piece is a few C-level scans.
    """

    def __init__(self, where: str, limit: int) -> None:
        self.where = where
        self.limit = limit
        self.line = 1  # number of the current line
        self.length = 0  # bytes of the current line before the piece being fed

    def feed(self, piece: bytes) -> None:
        """Account for the next ``piece``; DocumentError naming the first line over the limit."""
        position = 0
        while position < len(piece):
            end = min(len(piece), position + self.limit - self.length + 1)
            last_break = piece.rfind(b"\n", position, end)
            if last_break >= 0:  # every line ending in [position, end) is within the limit
                self.line += piece.count(b"\n", position, last_break + 1)
                self.length, position = 0, last_break + 1
                continue
            self.length += end - position
            if self.length > self.limit:
                raise line_too_long(self.where, self.line, self.limit)
            position = end
