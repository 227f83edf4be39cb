"""Transparent compression: ``.gz`` and ``.zst`` on any document format.

A file is compressed when its name ends in one of ``defaults.COMPRESSION_SUFFIXES`` after its
format suffix (``corpus.jsonl.zst``); it is decompressed as it is read and its translation is
compressed the same way (``corpus.zh.jsonl.zst``).
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import BinaryIO

import zstandard

from producer import defaults


def compression_of(path: Path) -> str:
    """The compression suffix of ``path`` (``".gz"``, ``".zst"``), or ``""`` for none."""
    suffix = Path(path).suffix.lower()
    return suffix if suffix in defaults.COMPRESSION_SUFFIXES else ""


def split_name(path: Path) -> tuple[str, str, str]:
    """``path``'s name as (stem, format suffix, compression suffix):
    ``a.b.csv.gz`` -> ``("a.b", ".csv", ".gz")``, ``a.txt`` -> ``("a", ".txt", "")``."""
    path = Path(path)
    compression = compression_of(path)
    inner = Path(path.name[: len(path.name) - len(compression)])
    return inner.stem, inner.suffix, path.name[len(path.name) - len(compression) :]


def decompressing(raw: BinaryIO, compression: str) -> BinaryIO:
    """A reader of the decompressed bytes of ``raw`` (``compression`` as ``compression_of``)."""
    if compression == ".gz":
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    if compression == ".zst":
        return _ZstdReader(raw)  # type: ignore[return-value]
    return raw


def compressing(raw: BinaryIO, compression: str) -> BinaryIO:
    """A writer that compresses into ``raw``; closing it finishes the stream, not ``raw``."""
    if compression == ".gz":
        return gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0)  # type: ignore[return-value]
    if compression == ".zst":
        return zstandard.ZstdCompressor(level=defaults.ZSTD_LEVEL).stream_writer(raw, closefd=False)
    return _Unclosed(raw)


class _ZstdReader:
    """The decompressed bytes of a zstd stream of one or more frames, ``raw`` fed a little at a
    time (``defaults.ZSTD_FEED_BYTES``) so that one piece never inflates past a bound.

    Unlike zstandard's ``stream_reader``, a stream cut short in a frame is an error
    (``zstandard.ZstdError``), not a silent end.
    """

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.frame = zstandard.ZstdDecompressor().decompressobj()
        self.started = False  # whether the current frame has had any input

    def read(self, size: int = -1) -> bytes:
        """Up to about ``size`` decompressed bytes (more when one fed piece inflates more);
        ``b""`` at the end of the stream."""
        out = bytearray()
        while size < 0 or len(out) < size:
            piece = self.frame.unused_data if self.frame.eof else b""
            if self.frame.eof:
                self.frame, self.started = zstandard.ZstdDecompressor().decompressobj(), False
            piece = piece or self.raw.read(defaults.ZSTD_FEED_BYTES)
            if not piece:
                if self.started:
                    raise zstandard.ZstdError("the stream ends in the middle of a frame")
                break
            self.started = True
            out += self.frame.decompress(piece)
        return bytes(out)


class _Unclosed:
    """``raw`` itself as a writer whose ``close`` leaves ``raw`` open (no compression)."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw

    def write(self, data: bytes) -> int:
        """Write ``data`` to ``raw``."""
        return self.raw.write(data)

    def close(self) -> None:
        """Nothing to finish."""
