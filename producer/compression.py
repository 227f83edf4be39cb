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
        return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True, closefd=False)
    return raw


def compressing(raw: BinaryIO, compression: str) -> BinaryIO:
    """A writer that compresses into ``raw``; closing it finishes the stream, not ``raw``."""
    if compression == ".gz":
        return gzip.GzipFile(fileobj=raw, mode="wb", mtime=0)  # type: ignore[return-value]
    if compression == ".zst":
        return zstandard.ZstdCompressor(level=defaults.ZSTD_LEVEL).stream_writer(raw, closefd=False)
    return _Unclosed(raw)


class _Unclosed:
    """``raw`` itself as a writer whose ``close`` leaves ``raw`` open (no compression)."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw

    def write(self, data: bytes) -> int:
        """Write ``data`` to ``raw``."""
        return self.raw.write(data)

    def close(self) -> None:
        """Nothing to finish."""
