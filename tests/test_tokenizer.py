import json
import random
from pathlib import Path

import pytest
from conftest import tiny_pairs

from models.builder.defaults import TATOEBA_CORPUS
from models.builder.tokenizer_convert import convert
from models.builder.validate import HARD_STRINGS
from models.bundle import read_manifest
from models.tokenizer import MarianCodec, PieceTable

DEMO = Path(__file__).resolve().parents[1] / "models" / "demo"
DEMO_CHECKPOINT = DEMO / "checkpoint"


def _saved_and_loaded(codec: MarianCodec, path: Path) -> MarianCodec:
    """`codec` saved to `path` and loaded back, as an export writes it and a worker reads it."""
    codec.save(path)
    loaded = MarianCodec.load(path, codec.eos_id, codec.unk_id)
    assert loaded is not None
    return loaded


def _codecs(model_dir: Path, out: Path) -> list[MarianCodec]:
    """The codec of `model_dir`'s converted tokenizer files, and the same saved and loaded."""
    convert(model_dir, out)
    codec = MarianCodec(out / "source.tokenizer.json", out / "target.tokenizer.json", 0, 1)
    return [codec, _saved_and_loaded(codec, out / "codec.npz")]


def _assert_parity(model_dir: Path, out: Path, texts: list[str]) -> None:
    from transformers import MarianTokenizer

    reference = MarianTokenizer.from_pretrained(model_dir)
    for codec in _codecs(model_dir, out):
        for text in texts:
            assert codec.encode(text).tolist() == reference(text).input_ids, text
        rng = random.Random(1)
        size = len(reference)
        for _ in range(3000):
            ids = [rng.randrange(size) for _ in range(rng.randrange(1, 40))]
            assert codec.decode(ids) == reference.decode(ids, skip_special_tokens=True), ids


def test_a_codec_saved_by_another_tokenization_revision_or_unknown_id_is_not_loaded(
    tiny_marian_dir, tmp_path, monkeypatch
):
    """The saved codec holds what one revision of the runtime derived from the tokenizer
    files: another revision (or another unknown id) reads the files again."""
    import models.defaults

    codec = _codecs(tiny_marian_dir, tmp_path)[0]
    assert MarianCodec.load(tmp_path / "codec.npz", 0, 2) is None
    monkeypatch.setattr(models.defaults, "TOKENIZATION", "another revision")
    assert MarianCodec.load(tmp_path / "codec.npz", 0, 1) is None
    codec.save(tmp_path / "codec.npz")
    assert MarianCodec.load(tmp_path / "codec.npz", 0, 1) is not None


def test_tiny_model_parity_with_marian_tokenizer(tiny_marian_dir, tmp_path):
    texts = [en for en, _ in tiny_pairs()] + [zh for _, zh in tiny_pairs()] + list(HARD_STRINGS)
    _assert_parity(tiny_marian_dir, tmp_path, texts)


@pytest.mark.skipif(
    not (DEMO_CHECKPOINT / "source.spm").exists() or not TATOEBA_CORPUS.exists(),
    reason="needs the demo checkpoint and ../shared/data/en-zh/cmn_hans.txt",
)
def test_demo_model_parity_on_the_whole_tatoeba_corpus(tmp_path):
    with TATOEBA_CORPUS.open(encoding="utf-8") as handle:
        english = [line.split("\t", 1)[0] for line in handle]
    _assert_parity(DEMO_CHECKPOINT, tmp_path, english + list(HARD_STRINGS))


@pytest.mark.skipif(not (DEMO_CHECKPOINT / "source.spm").exists(), reason="needs the demo checkpoint")
def test_the_demo_checkpoint_converts_to_the_shipped_tokenizer_files(tmp_path):
    convert(DEMO_CHECKPOINT, tmp_path)
    for name in ("source.tokenizer.json", "target.tokenizer.json", "vocab.json"):
        assert (tmp_path / name).read_bytes() == (DEMO / "bundle" / name).read_bytes(), name


def test_bundle_codec_puts_the_language_token_first(tiny_bundle):
    manifest = read_manifest(tiny_bundle)
    from models.translator import Translator

    codec = Translator(tiny_bundle, warmup=False).codec
    ids = codec.encode("Hello.")
    assert ids[0] == manifest.config.target_lang_token_id
    assert ids[-1] == manifest.config.eos_token_id


def test_piece_table_finds_every_piece_and_only_those():
    vocab = {"▁a": 0, "a": 1, "▁ab": 2, "中": 3, "": 4, "<unk>": 7, "😀": 9}  # ids 5, 6, 8 unused
    table = PieceTable.from_vocab(vocab)
    assert len(table) == 10
    for piece, id_ in vocab.items():
        assert table.find(piece) == id_
        assert table.piece(id_) == piece
    for missing in ("▁", "ab", "中文", "<pad>", "▁abc"):
        assert table.find(missing) is None
    assert table.present.tolist() == [i in vocab.values() for i in range(10)]


def test_text_the_charsmap_rewrites_into_a_special_token_is_pieces_as_in_marian_tokenizer(
    tiny_marian_dir, tmp_path
):
    """MarianTokenizer splits its special tokens out of the raw text, then SentencePiece
    normalizes: a full-width or small-form "＜/s＞" becomes the pieces of "</s>", never an
    end of sentence in the middle of the input (the runtime applies the charsmap itself),
    and "＜unk＞" those of "<unk>", never the unknown piece, which SentencePiece never matches."""
    texts = ["a ＜/s＞ b", "x﹤pad﹥y", "a </s> b ＜/s＞", "＜/s＞</s>", "a ＜unk＞ b", "﹤unk﹥<unk>"]
    _assert_parity(tiny_marian_dir, tmp_path, texts)


def test_text_that_a_charsmap_makes_into_any_name_is_never_the_unknown_piece(tiny_marian_dir, tmp_path):
    """The unknown piece is renamed at load so that `tokenizers` never matches it; a
    noncharacter followed by a full-width "＜unk＞" (the charsmap makes "\\uffff<unk>" of it)
    is unknown text then the pieces of "<unk>", as in MarianTokenizer, not the unknown piece."""
    texts = ["\uffff＜unk＞", "x\uffff﹤unk﹥y", "\uffff<unk>", "\uffff\uffff＜unk＞ a"]
    _assert_parity(tiny_marian_dir, tmp_path, texts)


def test_special_tokens_without_a_charsmap_get_their_vocab_ids(tiny_marian_dir, tmp_path):
    """A source tokenizer without a charsmap splits the special tokens out itself, under the
    ids `tokenizers` gives them at load (the unknown piece renamed, "<unk>" is a new one),
    not those written in the file: each maps to its own vocab.json id."""
    convert(tiny_marian_dir, tmp_path)
    source = tmp_path / "source.tokenizer.json"
    data = json.loads(source.read_text(encoding="utf-8"))
    data["normalizer"] = None
    source.write_text(json.dumps(data), encoding="utf-8")
    target = tmp_path / "target.tokenizer.json"
    vocab = json.loads(target.read_text(encoding="utf-8"))["model"]["vocab"]
    codec = MarianCodec(source, target, 0, 1)
    for each in (codec, _saved_and_loaded(codec, tmp_path / "codec.npz")):
        pieces, ids = each.pieces_and_ids("a </s> b <pad> c <unk> d")
        assert [ids[pieces.index(token)] for token in ("</s>", "<pad>", "<unk>")] == [
            vocab["</s>"],
            vocab["<pad>"],
            vocab["<unk>"],
        ]


def test_a_piece_named_like_a_special_token_keeps_its_vocab_id(tiny_marian_dir, tmp_path):
    """A unigram piece that bears a special token's name (a user-defined "<pad>") has its
    own source id beside the special token's: both map to the name's vocab.json id, so the
    "<pad>" that the charsmap makes of "＜pad＞" is looked up as MarianTokenizer does."""
    convert(tiny_marian_dir, tmp_path)
    source = tmp_path / "source.tokenizer.json"
    data = json.loads(source.read_text(encoding="utf-8"))
    data["model"]["vocab"].append(["<pad>", -1.0])
    source.write_text(json.dumps(data), encoding="utf-8")
    target = tmp_path / "target.tokenizer.json"
    vocab = json.loads(target.read_text(encoding="utf-8"))["model"]["vocab"]
    pieces, ids = MarianCodec(source, target, 0, 1).pieces_and_ids("a \uff1cpad\uff1e b <pad>")
    assert [i for piece, i in zip(pieces, ids, strict=True) if piece == "<pad>"] == [vocab["<pad>"]] * 2
