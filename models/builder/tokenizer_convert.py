"""Convert Marian's SentencePiece models and vocab.json to `tokenizers` JSON files.

The public conversions are inexact: they merge source and target scores (which changes
the segmentation) and build a Precompiled normalizer even from an empty charsmap
(which makes `tokenizers` panic). Here each side is converted on its own terms:

- source.tokenizer.json: the source.spm unigram model with its own pieces and scores,
  its own normalizer rules (`spm_normalizer`: exact, the charsmap applied by the runtime,
  or refused by `problems`), and Marian's special tokens split out first. The runtime
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
from tokenizers import AddedToken, Tokenizer, decoders, models

from models.builder import spm_normalizer
from models.charsmap import VERBATIM_KEY

SPECIAL_TOKENS = ("</s>", "<unk>", "<pad>")
# SentencePiece ModelProto.SentencePiece.Type values
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _UNUSED = 1, 2, 3, 4, 5
#: FLT_MIN: SentencePiece's floor of the highest normal piece score (unigram_model.cc).
_FLT_MIN = 1.17549435e-38


def _load_spm(path: Path) -> spm_model.ModelProto:
    proto = spm_model.ModelProto()
    proto.ParseFromString(path.read_bytes())
    return proto


def _user_defined(proto: spm_model.ModelProto) -> list[str]:
    """The model's user-defined pieces, which SentencePiece keeps whole wherever they occur."""
    return [piece.piece for piece in proto.pieces if piece.type == _USER_DEFINED]


def _problems(proto: spm_model.ModelProto) -> list[str]:
    found = []
    if proto.trainer_spec.model_type != 1:  # UNIGRAM
        found.append("not a unigram model (only unigram SentencePiece models are supported)")
    spec = proto.normalizer_spec
    spaced = [piece for piece in _user_defined(proto) if " " in piece]
    if spec.remove_extra_whitespaces and any("  " in piece for piece in spaced):
        found.append(
            "user-defined pieces holding two spaces in a row, which SentencePiece copies as they "
            "are and remove_extra_whitespaces=true collapses elsewhere"
        )
    if spaced and not spec.escape_whitespaces:
        found.append(
            "user-defined pieces holding spaces with escape_whitespaces=false (the unigram model "
            "then segments around them otherwise than SentencePiece)"
        )
    return found + spm_normalizer.problems(
        proto.normalizer_spec, proto.trainer_spec.treat_whitespace_as_suffix
    )


def problems(source_spm: Path) -> list[str]:
    """What in source.spm the source tokenizer cannot reproduce exactly (empty when nothing)."""
    return _problems(_load_spm(source_spm))


def source_tokenizer(source_spm: Path) -> Tokenizer:
    """Build the source-side tokenizer from source.spm (pieces are mapped to ids later)."""
    return _source_tokenizer(_load_spm(source_spm), source_spm)


def _source_tokenizer(proto: spm_model.ModelProto, source_spm: Path) -> Tokenizer:
    """`source_tokenizer` of the parsed source.spm `proto` (read from `source_spm`)."""
    found = _problems(proto)
    if found:
        raise ValueError(f"{source_spm}: cannot be converted exactly: {'; '.join(found)}")
    # control and unused pieces never match text in SentencePiece: a literal "<s>" is
    # "<", "s", ">" (Marian's </s>, <unk> and <pad> are split out first, as special tokens)
    matched = [piece for piece in proto.pieces if piece.type not in (_CONTROL, _UNUSED)]
    # a user-defined piece always wins where it occurs: SentencePiece scores it
    # length × max(FLT_MIN, the highest normal score) - 0.1, whatever its own score
    top = max([_FLT_MIN, *(piece.score for piece in proto.pieces if piece.type == _NORMAL)])
    pieces = [
        (piece.piece, len(piece.piece) * top - 0.1 if piece.type == _USER_DEFINED else piece.score)
        for piece in matched
    ]
    unk_id = next(i for i, piece in enumerate(matched) if piece.type == _UNKNOWN)
    tokenizer = Tokenizer(
        models.Unigram(pieces, unk_id=unk_id, byte_fallback=proto.trainer_spec.byte_fallback)
    )
    normalizer, pre_tokenizer = spm_normalizer.pipeline(proto.normalizer_spec, _user_defined(proto))
    if normalizer is not None:
        tokenizer.normalizer = normalizer
    if pre_tokenizer is not None:
        tokenizer.pre_tokenizer = pre_tokenizer
    tokenizer.add_special_tokens(
        [AddedToken(token, special=True, normalized=False) for token in SPECIAL_TOKENS]
    )
    return tokenizer


def source_json(source_spm: Path) -> str:
    """source.tokenizer.json's text: `source_tokenizer`, with source.spm's user-defined
    pieces listed on its Precompiled step (`VERBATIM_KEY`), since SentencePiece copies them
    as they are where its charsmap would rewrite them."""
    proto = _load_spm(source_spm)
    tokenizer = _source_tokenizer(proto, source_spm)
    verbatim = _user_defined(proto)
    if not verbatim:
        return tokenizer.to_str(pretty=True)
    data = json.loads(tokenizer.to_str())
    normalizer = data["normalizer"]
    for step in [] if normalizer is None else normalizer.get("normalizers", [normalizer]):
        if step["type"] == "Precompiled":
            step[VERBATIM_KEY] = verbatim
    return json.dumps(data, ensure_ascii=False, indent=2)


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
    (out_dir / "source.tokenizer.json").write_text(source_json(model_dir / "source.spm"), encoding="utf-8")
    target_tokenizer(model_dir / "target.spm", vocab).save(str(out_dir / "target.tokenizer.json"))
    (out_dir / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    return {
        "source": "source.tokenizer.json",
        "target": "target.tokenizer.json",
        "vocab": "vocab.json",
    }
