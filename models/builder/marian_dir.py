"""Write HuggingFace Marian checkpoints in the exact opus-mt directory layout.

Used by the demo-model training script and by the tests' tiny random models, so that
both go through the same `transqueue export` path as Helsinki-NLP/opus-mt-en-zh.
Export-time only: imports torch, transformers and sentencepiece.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import sentencepiece as spm

EOS = "</s>"
UNK = "<unk>"
PAD = "<pad>"
SPM_CONTROL = {"<s>", "</s>", "<unk>"}


@dataclass(frozen=True)
class SpmOptions:
    """Options for training one SentencePiece unigram model, opus-mt style."""

    vocab_size: int
    character_coverage: float = 1.0
    normalization_rule_name: str = "nmt_nfkc"
    max_sentence_length: int = 4192


def train_spm(lines: Iterable[str], path: Path, options: SpmOptions) -> None:
    """Train a unigram SentencePiece model on `lines` and write it to `path`.

    Training is single-threaded so that the same lines always give the same model.
    """
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(list(lines)),
        model_writer=model,
        model_type="unigram",
        vocab_size=options.vocab_size,
        character_coverage=options.character_coverage,
        normalization_rule_name=options.normalization_rule_name,
        max_sentence_length=options.max_sentence_length,
        num_threads=1,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    path.write_bytes(model.getvalue())


def spm_pieces(path: Path) -> list[str]:
    """Return the pieces of a SentencePiece model in id order."""
    processor = spm.SentencePieceProcessor(model_file=str(path))
    return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


def build_shared_vocab(
    source_pieces: Sequence[str], target_pieces: Sequence[str], extra: Sequence[str] = ()
) -> dict[str, int]:
    """Build a Marian shared vocabulary: `</s>`=0, `<unk>`=1, extras, pieces, `<pad>` last.

    This is the layout of opus-mt-en-zh: eos 0, unk 1, language tokens early, the
    union of source and target pieces, and pad as the last id (also the decoder start).
    """
    vocab: dict[str, int] = {EOS: 0, UNK: 1}
    for piece in [*extra, *source_pieces, *target_pieces]:
        if piece not in SPM_CONTROL and piece not in vocab:
            vocab[piece] = len(vocab)
    vocab[PAD] = len(vocab)
    return vocab


def write_tokenizer_files(
    directory: Path,
    source_spm: Path,
    target_spm: Path,
    vocab: dict[str, int],
    source_lang: str,
    target_lang: str,
) -> None:
    """Place source.spm, target.spm, vocab.json and tokenizer_config.json in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    if source_spm != directory / "source.spm":
        (directory / "source.spm").write_bytes(source_spm.read_bytes())
    if target_spm != directory / "target.spm":
        (directory / "target.spm").write_bytes(target_spm.read_bytes())
    (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False, indent=2))
    config = {
        "source_lang": source_lang,
        "target_lang": target_lang,
        "separate_vocabs": False,
        "model_max_length": 512,
        "tokenizer_class": "MarianTokenizer",
        "unk_token": UNK,
        "eos_token": EOS,
        "pad_token": PAD,
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    special = {"eos_token": EOS, "unk_token": UNK, "pad_token": PAD}
    (directory / "special_tokens_map.json").write_text(json.dumps(special, indent=2))


def marian_config(vocab: dict[str, int], *, d_model: int, layers: int, heads: int, ffn_dim: int, **extra):
    """Return a MarianConfig with the opus-mt-en-zh special-token conventions.

    pad is the last id and also the decoder start token, eos is 0, and the input/output
    embeddings are tied. Encoder and decoder get the same `layers`, `heads` and
    `ffn_dim`, as in opus-mt; `extra` passes further MarianConfig fields (dropout).
    """
    from transformers import MarianConfig

    pad_id = vocab[PAD]
    return MarianConfig(
        vocab_size=len(vocab),
        decoder_vocab_size=len(vocab),
        pad_token_id=pad_id,
        decoder_start_token_id=pad_id,
        eos_token_id=vocab[EOS],
        forced_eos_token_id=vocab[EOS],
        max_position_embeddings=512,
        activation_function="swish",
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        static_position_embeddings=True,
        d_model=d_model,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        encoder_ffn_dim=ffn_dim,
        decoder_ffn_dim=ffn_dim,
        **extra,
    )


def marian_generation_config(vocab: dict[str, int]):
    """The generation_config.json of opus-mt-en-zh, for our vocabulary: pad is a bad word."""
    from transformers import GenerationConfig

    pad_id = vocab[PAD]
    return GenerationConfig(
        bad_words_ids=[[pad_id]],
        bos_token_id=vocab[EOS],
        decoder_start_token_id=pad_id,
        eos_token_id=vocab[EOS],
        forced_eos_token_id=vocab[EOS],
        max_length=512,
        num_beams=4,
        pad_token_id=pad_id,
        renormalize_logits=True,
    )
