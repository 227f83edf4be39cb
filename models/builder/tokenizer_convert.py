"""Convert Marian's SentencePiece models and vocab.json to `tokenizers` JSON files.

The public conversions are inexact: they merge source and target scores (which changes
the segmentation) and build a Precompiled normalizer even from an empty charsmap
(which makes `tokenizers` panic). Here each side is converted on its own terms:

- source.tokenizer.json: the source.spm unigram model with its own pieces and scores,
  its own normalizer rules, and Marian's special tokens split out first. The runtime
  maps the produced pieces to ids through vocab.json, exactly as MarianTokenizer does.
- target.tokenizer.json: a word-level model over vocab.json, so that generated ids map
  straight back to pieces, with a decoder equal to SentencePiece's `decode_pieces` on
  target.spm (▁ → space, byte pieces fused, control pieces dropped).

Export-time only (reads the SentencePiece protobuf).
"""

from __future__ import annotations

import json
from pathlib import Path

from sentencepiece import sentencepiece_model_pb2 as spm_model
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

SPECIAL_TOKENS = ("</s>", "<unk>", "<pad>")
_UNKNOWN, _CONTROL = 2, 3  # SentencePiece ModelProto.SentencePiece.Type values


def _load_spm(path: Path) -> spm_model.ModelProto:
    proto = spm_model.ModelProto()
    proto.ParseFromString(path.read_bytes())
    return proto


def _normalizer(spec) -> normalizers.Normalizer | None:
    steps = []
    if spec.precompiled_charsmap:
        steps.append(normalizers.Precompiled(spec.precompiled_charsmap))
    if spec.remove_extra_whitespaces:  # \A and \z: `tokenizers`' ^ and $ match at every line
        steps.append(normalizers.Replace(Regex(r"\A +| +\z"), ""))
        steps.append(normalizers.Replace(Regex(" {2,}"), " "))
    if not steps:
        return None
    return normalizers.Sequence(steps)


def source_tokenizer(source_spm: Path) -> Tokenizer:
    """Build the source-side tokenizer from source.spm (pieces are mapped to ids later)."""
    proto = _load_spm(source_spm)
    if proto.trainer_spec.model_type != 1:  # UNIGRAM
        raise ValueError(f"{source_spm}: only unigram SentencePiece models are supported")
    # control pieces (<s>, </s>) never match text in SentencePiece: a literal "<s>" is
    # "<", "s", ">" (Marian's </s>, <unk> and <pad> are split out first, as special tokens)
    matched = [piece for piece in proto.pieces if piece.type != _CONTROL]
    pieces = [(piece.piece, piece.score) for piece in matched]
    unk_id = next(i for i, piece in enumerate(matched) if piece.type == _UNKNOWN)
    tokenizer = Tokenizer(
        models.Unigram(pieces, unk_id=unk_id, byte_fallback=proto.trainer_spec.byte_fallback)
    )
    normalizer = _normalizer(proto.normalizer_spec)
    if normalizer is not None:
        tokenizer.normalizer = normalizer
    prepend = "always" if proto.normalizer_spec.add_dummy_prefix else "never"
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme=prepend, split=False)
    tokenizer.add_special_tokens(
        [AddedToken(token, special=True, normalized=False) for token in SPECIAL_TOKENS]
    )
    return tokenizer


def target_tokenizer(target_spm: Path, vocab: dict[str, int]) -> Tokenizer:
    """Build the target-side decoder: Marian ids → pieces → text, as target.spm decodes."""
    proto = _load_spm(target_spm)
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    steps = [decoders.Replace("▁", " ")]
    if proto.trainer_spec.byte_fallback:
        steps.append(decoders.ByteFallback())
    steps.append(decoders.Fuse())
    tokenizer.decoder = decoders.Sequence(steps)
    control = {piece.piece for piece in proto.pieces if piece.type == _CONTROL}
    skipped = [token for token in vocab if token in SPECIAL_TOKENS or token in control]
    tokenizer.add_special_tokens([AddedToken(token, special=True) for token in skipped])
    return tokenizer


def convert(model_dir: Path, out_dir: Path) -> dict[str, str]:
    """Write source.tokenizer.json, target.tokenizer.json and vocab.json into `out_dir`.

    Returns the names of the written files by role.
    """
    vocab = json.loads((model_dir / "vocab.json").read_text(encoding="utf-8"))
    source_tokenizer(model_dir / "source.spm").save(str(out_dir / "source.tokenizer.json"))
    target_tokenizer(model_dir / "target.spm", vocab).save(str(out_dir / "target.tokenizer.json"))
    (out_dir / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    return {
        "source": "source.tokenizer.json",
        "target": "target.tokenizer.json",
        "vocab": "vocab.json",
    }
