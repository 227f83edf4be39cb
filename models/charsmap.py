"""SentencePiece's precompiled charsmap, applied exactly as SentencePiece applies it.

A charsmap (the ``precompiled_charsmap`` of a SentencePiece NormalizerSpec, which
`transqueue export` keeps in source.tokenizer.json's ``Precompiled`` step) is a Darts-clone
double-array trie over UTF-8 keys, then the replacements, each ended by NUL. SentencePiece
(normalizer.cc, ``Normalizer::NormalizePrefix``) rewrites the text from left to right: at
each position the longest key that starts there is replaced, and where none does, one
character is kept as it is. `tokenizers`' ``Precompiled`` normalizer looks keys up grapheme
cluster by grapheme cluster instead, which rewrites some clusters otherwise (a full-width
letter and a combining accent, Hangul in conjoining jamo, CR LF under nmt_nfkc): the runtime
applies the charsmap with this module and hands the rest of the normalizer to `tokenizers`.
"""

from __future__ import annotations

import array
import re
import struct
import sys
from collections.abc import Sequence

import numpy as np

#: The key of source.tokenizer.json's Precompiled step that lists source.spm's user-defined
#: pieces (written by `models.builder.tokenizer_convert`; `tokenizers` ignores it).
VERBATIM_KEY = "transqueue_verbatim"

#: SentencePiece keeps the first 32 matches of a lookup and takes the longest of them
#: (normalizer.cc, kMaxTrieResultsSize).
_MAX_MATCHES = 32


def _offset(unit: int) -> int:
    """A Darts-clone unit's offset to its children."""
    return (unit >> 10) << ((unit & (1 << 9)) >> 6)


def _label(unit: int) -> int:
    """A Darts-clone unit's label (the byte that leads to it; top bit set on a leaf)."""
    return unit & ((1 << 31) | 0xFF)


def _has_leaf(unit: int) -> bool:
    """Whether a key ends at a Darts-clone unit (its value is in the child at offset 0)."""
    return bool((unit >> 8) & 1)


def _byte_class(values: set[int]) -> bytes:
    """A regular expression's class of the bytes `values` (one that matches nothing if empty)."""
    return b"[" + b"".join(re.escape(bytes([v])) for v in sorted(values)) + b"]" if values else rb"(?!)"


def _check_replacements(units: np.ndarray, replacements: bytes) -> None:
    """ValueError unless every value of the trie's leaves (`units`, its 32-bit units; a value's
    unit has its top bit set) starts UTF-8 text that a NUL ends in `replacements`: checked at
    load, not when some text first meets a damaged replacement."""
    try:
        replacements.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"not a precompiled charsmap: replacements not UTF-8 at byte {error.start}"
        ) from None
    offsets = np.unique(units[units >> 31 == 1] & 0x7FFFFFFF)
    if not len(offsets):
        return
    text = np.frombuffer(replacements, dtype=np.uint8)
    last_nul = replacements.rfind(b"\0")
    if offsets[-1] > last_nul or np.any((text[offsets] >= 0x80) & (text[offsets] < 0xC0)):
        raise ValueError(
            "not a precompiled charsmap: a replacement starts inside a character or is not ended by NUL"
        )


def _utf8_length(lead: int) -> int:
    """The length of the UTF-8 sequence that byte `lead` starts (text from `str.encode`)."""
    return 1 if lead < 0xC0 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4


class Charsmap:
    """A precompiled charsmap, applied by `normalize` as SentencePiece applies it; where one
    of the `verbatim` strings (the model's user-defined pieces) starts, the longest of them
    is kept as it is, before any key is looked up (normalizer.cc's PrefixMatcher)."""

    def __init__(self, charsmap: bytes, verbatim: Sequence[str] = ()) -> None:
        size = struct.unpack_from("<I", charsmap)[0] if len(charsmap) >= 4 else -1
        if size < 0 or size % 4 or 4 + size > len(charsmap):
            raise ValueError(f"not a precompiled charsmap: a trie of {size} bytes in {len(charsmap)}")
        #: The trie's 32-bit little-endian units, as a compact array (a tuple of Python ints
        #: took 1.7 MB more at opus-mt's charsmap); "I" is 4 bytes on every CPython platform.
        self._units = array.array("I", charsmap[4 : 4 + size])
        if sys.byteorder == "big":
            self._units.byteswap()
        self._replacements = charsmap[4 + size :]
        #: The user-defined pieces it was given.
        self.verbatim = tuple(verbatim)
        _check_replacements(
            np.frombuffer(charsmap, dtype="<u4", count=size // 4, offset=4), self._replacements
        )
        root = _offset(self._units[0]) if self._units else 0
        # a key starts with a character's first byte, never a continuation byte
        starts = {b for b in range(256) if not 0x80 <= b < 0xC0 and self._child(root, b) is not None}
        ascii_keys = {b for b in starts if b < 0x80 and self._ascii_goes_on(root, b)}
        #: Where a key may start: a byte that is a key or that a key goes on from with an
        #: ASCII byte, a non-ASCII character's first byte, and the first byte of another key
        #: when a non-ASCII byte follows it (nmt_nfkc has keys of a letter and a combining
        #: accent, for one). Text without such a place is left as it is, found without a
        #: step of Python.
        anywhere = _byte_class(ascii_keys | {b for b in starts if b >= 0x80})
        before_non_ascii = _byte_class({b for b in starts if b < 0x80} - ascii_keys) + rb"(?=[\x80-\xff])"
        symbols = sorted({v.encode("utf-8") for v in verbatim if v}, key=len, reverse=True)
        #: The user-defined pieces, longest first: the first alternative that matches wins.
        self._verbatim = re.compile(b"|".join(map(re.escape, symbols))) if symbols else None
        places = [anywhere, before_non_ascii] if starts else []
        places += [self._verbatim.pattern] if self._verbatim else []
        self._starts = re.compile(b"|".join(places)) if places else None

    def _child(self, node: int, byte: int) -> int | None:
        """The unit that `byte` leads to among the children at `node`, or None."""
        child = node ^ byte
        return child if child < len(self._units) and _label(self._units[child]) == byte else None

    def _ascii_goes_on(self, node: int, byte: int) -> bool:
        """Whether `byte`, among the children at `node`, ends a key or a key goes on from it
        with an ASCII byte (a key of a letter then ASCII, whatever follows, starts anywhere)."""
        child = self._child(node, byte)
        if child is None:
            return False
        unit = self._units[child]
        if _has_leaf(unit):
            return True
        below = child ^ _offset(unit)
        return any(self._child(below, b) is not None for b in range(1, 0x80))

    def _longest(self, data: bytes, start: int) -> tuple[int, int]:
        """(length, replacement offset) of the longest key at `data[start:]`; (0, 0) if none."""
        if not self._units:
            return 0, 0
        units, node = self._units, _offset(self._units[0])
        longest, value, matches = 0, 0, 0
        for i in range(start, len(data)):
            byte = data[i]
            node ^= byte
            if node >= len(units) or _label(units[node]) != byte:
                break
            unit = units[node]
            node ^= _offset(unit)
            if node >= len(units):  # a damaged trie: no key goes on past here
                break
            if _has_leaf(unit):
                matches += 1
                if matches <= _MAX_MATCHES and i + 1 - start > longest:
                    longest, value = i + 1 - start, units[node] & 0x7FFFFFFF
        return longest, value

    def _replacement(self, offset: int) -> bytes:
        """The NUL-ended replacement at `offset`."""
        return self._replacements[offset : self._replacements.index(b"\0", offset)]

    def to_bytes(self) -> bytes:
        """The precompiled charsmap this was made of."""
        units = array.array("I", self._units)
        if sys.byteorder == "big":
            units.byteswap()
        return struct.pack("<I", 4 * len(units)) + units.tobytes() + self._replacements

    def normalize(self, text: str) -> str:
        """`text` rewritten through the charsmap, longest key first, as SentencePiece does."""
        if self._starts is None:
            return text
        data = text.encode("utf-8")
        found = self._starts.search(data)
        if found is None:
            return text
        out, kept = bytearray(), 0
        while found is not None:
            position = found.start()
            symbol = self._verbatim.match(data, position) if self._verbatim else None
            if symbol:
                found = self._starts.search(data, symbol.end())
                continue
            length, value = self._longest(data, position)
            if length:
                out += data[kept:position]
                out += self._replacement(value)
                kept = position + length
                found = self._starts.search(data, kept)
            else:
                found = self._starts.search(data, position + _utf8_length(data[position]))
        out += data[kept:]
        return out.decode("utf-8")
