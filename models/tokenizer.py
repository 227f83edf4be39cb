"""Marian source encoding and target decoding with the `tokenizers` library only.

Encoding follows MarianTokenizer: source.spm pieces are mapped to ids through
vocab.json (unknown pieces become `<unk>`), `</s>` is appended, and the target-language
token, when the bundle has one, is put first. vocab.json is not loaded for it: the target
tokenizer's word-level vocabulary is vocab.json (`models.builder.tokenizer_convert`), so
its `token_to_id` is that map, held once in Rust instead of a second time as a Python dict
(16 MB at opus-mt size). Decoding maps ids back to pieces and
applies target.spm's decoding, then strips, as MarianTokenizer.decode does with
skip_special_tokens=True.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tokenizers import Tokenizer


class MarianCodec:
    """Text ↔ Marian ids for one bundle."""

    def __init__(
        self,
        source_file: Path,
        target_file: Path,
        eos_id: int,
        unk_id: int,
        prefix_ids: tuple[int, ...] = (),
    ) -> None:
        self._source = Tokenizer.from_file(str(source_file))
        self._target = Tokenizer.from_file(str(target_file))
        self.eos_id = eos_id
        self.unk_id = unk_id
        self.prefix_ids = prefix_ids

    def pieces(self, text: str) -> list[str]:
        """The source pieces of `text`, as source.spm segments it."""
        return self._source.encode(text, add_special_tokens=False).tokens

    def piece_ids(self, pieces: list[str]) -> list[int]:
        """Vocabulary ids of source pieces; a piece missing from vocab.json is `<unk>`."""
        found = map(self._target.token_to_id, pieces)
        return [self.unk_id if id_ is None else id_ for id_ in found]

    def encode(self, text: str) -> np.ndarray:
        """Source ids of `text`: [language token] + pieces + [eos], as int64."""
        ids = self.piece_ids(self.pieces(text))
        return np.array([*self.prefix_ids, *ids, self.eos_id], dtype=np.int64)

    def decode(self, ids) -> str:
        """Text of generated target ids, special tokens skipped."""
        return self._target.decode([int(i) for i in ids], skip_special_tokens=True).strip()
