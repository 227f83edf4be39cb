"""Marian source encoding and target decoding with the `tokenizers` library and numpy.

Encoding follows MarianTokenizer: source.spm pieces are mapped to ids through
vocab.json (unknown pieces become `<unk>`), `</s>` is appended, and the target-language
token, when the bundle has one, is put first. The source text goes through source.spm's
charsmap here (`models.charsmap`, SentencePiece's longest match), then through the rest of
source.tokenizer.json's normalizer and its unigram model in `tokenizers`. Decoding maps ids back to pieces and
applies target.spm's decoding (the target tokenizer's decoder), then strips, as
MarianTokenizer.decode does with skip_special_tokens=True.

The vocabulary (65,001 pieces at opus-mt size) is held once, as flat arrays
(`PieceTable`, about 1.5 MB), not as the target tokenizer's word-level model, whose two
Rust hash maps held 18 MB, nor as Python dicts (16 MB). A source piece's id is looked
up by its source.spm id in an array made at load time; only pieces that source.spm does
not know (its `<unk>`, which MarianTokenizer still looks up by their text) are searched.
"""

from __future__ import annotations

import base64
import bisect
import itertools
import json
import re
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from models import defaults
from models.charsmap import VERBATIM_KEY, Charsmap


class PieceTable:
    """vocab.json (piece → id) as flat arrays: pieces by id, and ids in piece order."""

    def __init__(self, present: np.ndarray, offsets: np.ndarray, blob: bytes, order: np.ndarray) -> None:
        #: Whether vocab.json has an id, by id.
        self.present = present
        self._offsets = offsets
        self._blob = blob
        self._sorted = order

    @classmethod
    def from_vocab(cls, vocab: dict[str, int]) -> PieceTable:
        """The table of `vocab` (piece → id)."""
        ids = list(vocab.values())
        size = max(ids, default=-1) + 1
        by_id = [b""] * size
        for piece, id_ in vocab.items():
            by_id[id_] = piece.encode("utf-8")
        present = np.zeros(size, dtype=bool)
        present[ids] = True
        offsets = np.zeros(size + 1, dtype=np.int64)
        np.cumsum(list(map(len, by_id)), out=offsets[1:])
        in_order = sorted(np.flatnonzero(present).tolist(), key=by_id.__getitem__)
        return cls(present, offsets, b"".join(by_id), np.array(in_order, dtype=np.int32))

    def arrays(self) -> dict[str, np.ndarray]:
        """The table as arrays named after `__init__`'s arguments (the blob as bytes), for
        `MarianCodec.save`."""
        blob = np.frombuffer(self._blob, dtype=np.uint8)
        return {"present": self.present, "offsets": self._offsets, "blob": blob, "order": self._sorted}

    def __len__(self) -> int:
        return len(self.present)

    def piece_bytes(self, id_: int) -> bytes:
        """The UTF-8 bytes of piece `id_` (empty for an id that vocab.json lacks)."""
        return self._blob[self._offsets[id_] : self._offsets[id_ + 1]]

    def piece(self, id_: int) -> str:
        """Piece `id_` as text."""
        return self.piece_bytes(id_).decode("utf-8")

    def find(self, piece: str) -> int | None:
        """The id of `piece`, or None if vocab.json does not have it."""
        key = piece.encode("utf-8")
        index = bisect.bisect_left(self._sorted, key, key=self.piece_bytes)
        if index < len(self._sorted) and self.piece_bytes(self._sorted[index]) == key:
            return int(self._sorted[index])
        return None


def _piece_ids(model: dict) -> dict[str, int]:
    """Piece → id of a source tokenizer's model: a unigram model's pieces are numbered in
    the order listed (a later duplicate wins, as in `tokenizers`); a word-level model lists
    them with their ids."""
    if model["type"] == "Unigram":
        return {piece: id_ for id_, (piece, _score) in enumerate(model["vocab"])}
    return dict(model["vocab"])


def _decoder(decoder_json: str):
    """The target tokenizer's decoder (`decoder_json`, its JSON) alone: a tokenizer over a
    one-piece vocabulary, so that the 65,000-piece model is never built."""
    stub = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": json.loads(decoder_json),
        "model": {"type": "WordLevel", "vocab": {"<unk>": 0}, "unk_token": "<unk>"},
    }
    return Tokenizer.from_str(json.dumps(stub)).decoder


def _charsmap_steps(source: dict) -> tuple[str, Charsmap | None]:
    """Take the charsmap out of a source tokenizer's normalizer (its ``Precompiled`` step,
    with the ``Prepend`` steps before it), so that `models.charsmap` applies it as
    SentencePiece does; returns what those steps prepend to a non-empty text, and the
    charsmap (None where there is none). ValueError for a normalizer that applies a
    charsmap after any other step (`transqueue export` never writes one)."""
    normalizer = source.get("normalizer")
    if normalizer is None:
        return "", None
    steps = normalizer["normalizers"] if normalizer["type"] == "Sequence" else [normalizer]
    kinds = [step["type"] for step in steps]
    if "Precompiled" not in kinds:
        return "", None
    at = kinds.index("Precompiled")
    if set(kinds[:at]) - {"Prepend"} or "Precompiled" in kinds[at + 1 :]:
        raise ValueError(f"a source normalizer of steps {kinds} applies its charsmap after other steps")
    prefix = "".join(step["prepend"] for step in reversed(steps[:at]))
    charsmap = Charsmap(base64.b64decode(steps[at]["precompiled_charsmap"]), steps[at].get(VERBATIM_KEY, ()))
    rest = steps[at + 1 :]
    source["normalizer"] = {"type": "Sequence", "normalizers": rest} if rest else None
    return prefix, charsmap


#: What the source tokenizer's unknown piece is called at runtime: SentencePiece never
#: segments text into its unknown piece, while `tokenizers`' Unigram would match its text
#: ("<unk>", which a charsmap makes of a full-width "＜unk＞") like any other piece. Its
#: trie never matches an empty piece; any other name is some text's (a noncharacter then
#: "＜unk＞" became that text through the charsmap, and the unknown piece).
UNKNOWN_PIECE = ""


def _hide_unknown_piece(source: dict) -> None:
    """Rename the unknown piece of a source tokenizer's unigram model to `UNKNOWN_PIECE`
    (its id stays: unknown text still gets it, and is then looked up by its text)."""
    model = source["model"]
    unk_id = model.get("unk_id")
    if model.get("type") == "Unigram" and unk_id is not None:
        model["vocab"][unk_id][0] = UNKNOWN_PIECE


def _splitter(specials: list[str]) -> re.Pattern[str] | None:
    """A pattern that finds the special tokens `specials` in raw text, longest first (None
    when there are none)."""
    if not specials:
        return None
    return re.compile("|".join(map(re.escape, sorted(specials, key=len, reverse=True))))


def _utf8(text: str) -> np.ndarray:
    """`text` as an array of its UTF-8 bytes (an .npz holds it without pickling)."""
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8)


def _text(array: np.ndarray) -> str:
    """The text `_utf8` made `array` of."""
    return array.tobytes().decode("utf-8")


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
        source = json.loads(Path(source_file).read_text(encoding="utf-8"))
        #: What the text goes through before `tokenizers`: a prefix, then the charsmap.
        self._prefix, self._charsmap = _charsmap_steps(source)
        _hide_unknown_piece(source)
        specials = [token["content"] for token in source.get("added_tokens", [])]
        #: Source ids of the special tokens where this class splits them out itself (below).
        self._specials: dict[str, int] = {}
        self._special_split: re.Pattern[str] | None = None
        # piece → source id, as the tokenizer's get_vocab gives it, without the 65,000-entry
        # dict made in Rust and converted (a tenth of a second at opus-mt size)
        source_ids = _piece_ids(source["model"])
        if self._charsmap is None:
            self._source = Tokenizer.from_str(json.dumps(source))
            # the ids `tokenizers` gave the added tokens at load, not the file's: "<unk>", its
            # unknown piece renamed (`_hide_unknown_piece`), is a new token after the others
            source_ids.update((content, self._source.token_to_id(content)) for content in specials)
        else:
            # With the charsmap taken out, the special tokens are split out of the raw text
            # here, as `tokenizers` and MarianTokenizer do before normalizing, and the text
            # between them goes through the charsmap and a tokenizer without them: a full-width
            # "＜/s＞", which the charsmap rewrites into "</s>", stays pieces, never an end of
            # sentence. Their source ids follow the unigram model's.
            self._source = Tokenizer.from_str(json.dumps({**source, "added_tokens": []}))
            first = max(source_ids.values(), default=-1) + 1
            self._specials = {content: first + i for i, content in enumerate(specials)}
            self._special_split = _splitter(specials)
        #: The id source.spm gives pieces it does not know.
        self._source_unk_id = source["model"].get("unk_id")
        del source
        target = json.loads(Path(target_file).read_text(encoding="utf-8"))
        vocab: dict[str, int] = target["model"]["vocab"]  # vocab.json, for the load only
        self.vocab = PieceTable.from_vocab(vocab)
        #: The target tokenizer's decoder, as JSON (kept for `save`).
        self._decoder_json = json.dumps(target["decoder"])
        self._decoder = _decoder(self._decoder_json)
        #: Ids that decoding turns into text: vocab.json's, but the target tokenizer's special tokens.
        self._decoded = self.vocab.present.copy()
        self._decoded[[token["id"] for token in target["added_tokens"] if token["special"]]] = False
        # source id → vocab.json id (unk_id where vocab.json lacks the piece).
        # The specials apart from the pieces: a piece may bear a special token's name (a
        # user-defined "<pad>", which the charsmap makes of "＜pad＞") under its own id.
        size = max([*source_ids.values(), *self._specials.values()], default=-1) + 1
        self._by_source_id = np.full(size, unk_id, dtype=np.int64)
        for ids in (source_ids, self._specials):
            positions = np.fromiter(ids.values(), dtype=np.int64, count=len(ids))
            self._by_source_id[positions] = list(map(vocab.get, ids, itertools.repeat(unk_id)))
        del target, vocab, source_ids
        self.eos_id = eos_id
        self.unk_id = unk_id
        self.prefix_ids = prefix_ids

    def save(self, path: Path) -> None:
        """Write this codec to `path` (an .npz) for `load`: `transqueue export` writes it
        beside the tokenizer files, so that a worker does not parse their JSON (at opus-mt
        size, 0.15 s holding the GIL) to build the same arrays again."""
        charsmap = self._charsmap
        state = {
            "revision": np.array(defaults.TOKENIZATION),
            "unk_id": np.array(self.unk_id),
            "prefix": np.array(self._prefix),
            "has_charsmap": np.array(charsmap is not None),
            "charsmap": np.frombuffer(charsmap.to_bytes() if charsmap else b"", dtype=np.uint8),
            "verbatim": np.array(charsmap.verbatim if charsmap else (), dtype=str),
            "specials": np.array(list(self._specials), dtype=str),
            "special_ids": np.array(list(self._specials.values()), dtype=np.int64),
            "source": _utf8(self._source.to_str()),
            "source_unk_id": np.array(-1 if self._source_unk_id is None else self._source_unk_id),
            **self.vocab.arrays(),
            "decoder": _utf8(self._decoder_json),
            "decoded": self._decoded,
            "by_source_id": self._by_source_id,
        }
        with Path(path).open("wb") as handle:
            np.savez(handle, **state)

    @classmethod
    def load(
        cls, path: Path, eos_id: int, unk_id: int, prefix_ids: tuple[int, ...] = ()
    ) -> MarianCodec | None:
        """The codec `save` wrote to `path`, or None where it was made by another
        tokenization revision of the runtime (`models.defaults.TOKENIZATION`) or for another
        unknown id: the tokenizer files are then read instead."""
        with np.load(path, allow_pickle=False) as state:
            if str(state["revision"]) != defaults.TOKENIZATION or int(state["unk_id"]) != unk_id:
                return None
            codec = cls.__new__(cls)
            codec._prefix = str(state["prefix"])
            codec._charsmap = (
                Charsmap(state["charsmap"].tobytes(), state["verbatim"].tolist())
                if bool(state["has_charsmap"])
                else None
            )
            codec._specials = dict(
                zip(state["specials"].tolist(), state["special_ids"].tolist(), strict=True)
            )
            codec._special_split = _splitter(list(codec._specials))
            codec._source = Tokenizer.from_str(_text(state["source"]))
            source_unk_id = int(state["source_unk_id"])
            codec._source_unk_id = None if source_unk_id < 0 else source_unk_id
            codec.vocab = PieceTable(
                state["present"], state["offsets"], state["blob"].tobytes(), state["order"]
            )
            codec._decoder_json = _text(state["decoder"])
            codec._decoder = _decoder(codec._decoder_json)
            codec._decoded = state["decoded"]
            codec._by_source_id = state["by_source_id"]
        codec.eos_id = eos_id
        codec.unk_id = unk_id
        codec.prefix_ids = prefix_ids
        return codec

    def _segmented(self, text: str) -> tuple[list[str], list[int]]:
        """`text` normalized and segmented as source.spm does it: its pieces and their ids."""
        if self._charsmap is None:
            encoding = self._source.encode(text, add_special_tokens=False)
            return encoding.tokens, encoding.ids
        pieces: list[str] = []
        ids: list[int] = []
        start = 0
        for special in self._special_split.finditer(text) if self._special_split else ():
            self._add_segment(text[start : special.start()], pieces, ids)
            pieces.append(special.group())
            ids.append(self._specials[special.group()])
            start = special.end()
        self._add_segment(text[start:], pieces, ids)
        return pieces, ids

    def _add_segment(self, text: str, pieces: list[str], ids: list[int]) -> None:
        """Add the pieces and ids of `text`, which holds no special token, to `pieces` and `ids`."""
        if text:
            encoding = self._source.encode(
                self._charsmap.normalize(self._prefix + text), add_special_tokens=False
            )
            pieces += encoding.tokens
            ids += encoding.ids

    def pieces(self, text: str) -> list[str]:
        """The source pieces of `text`, as source.spm segments it."""
        return self._segmented(text)[0]

    def pieces_and_ids(self, text: str) -> tuple[list[str], list[int]]:
        """The source pieces of `text` and their vocab.json ids (`<unk>` where it lacks one)."""
        pieces, source_ids = self._segmented(text)
        ids = self._by_source_id[source_ids].tolist()
        for position, source_id in enumerate(source_ids):
            if source_id == self._source_unk_id:  # an unknown piece: looked up by its text
                found = self.vocab.find(pieces[position])
                ids[position] = self.unk_id if found is None else found
        return pieces, ids

    def encode(self, text: str) -> np.ndarray:
        """Source ids of `text`: [language token] + pieces + [eos], as int64."""
        _, ids = self.pieces_and_ids(text)
        return np.array([*self.prefix_ids, *ids, self.eos_id], dtype=np.int64)

    def decode(self, ids) -> str:
        """Text of generated target ids, special tokens skipped."""
        size = len(self.vocab)
        pieces = [self.vocab.piece(id_) for id_ in map(int, ids) if 0 <= id_ < size and self._decoded[id_]]
        return self._decoder.decode(pieces).strip()
