"""Shared fixtures: tiny random Marian checkpoints in the opus-mt layout and their bundles.

The checkpoint is built the way opus-mt-en-zh is laid out (pad = decoder start, pad
masked as a bad word, non-zero final_logits_bias, tied embeddings, a `>>cmn_Hans<<`
language token), from SentencePiece models trained on tests/data/tiny_corpus.tsv
(400 Tatoeba pairs, CC BY 2.0 FR, attribution in its third column). Building and
exporting takes seconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
TINY_CORPUS = DATA / "tiny_corpus.tsv"


def tiny_pairs() -> list[tuple[str, str]]:
    """The (english, chinese) pairs of the tiny corpus."""
    lines = TINY_CORPUS.read_text(encoding="utf-8").splitlines()
    return [tuple(line.split("\t")[:2]) for line in lines]


def train_unigram(**options) -> bytes:
    """A SentencePiece unigram model of 300 pieces or so, trained on the tiny corpus's English
    side; `options` are more of the trainer's (normalization rules, user-defined symbols)."""
    import io

    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([en for en, _ in tiny_pairs()]),
        model_writer=model,
        model_type="unigram",
        vocab_size=300,
        num_threads=1,
        hard_vocab_limit=False,
        minloglevel=2,
        **options,
    )
    return model.getvalue()


def build_tiny_marian(directory: Path, seed: int = 0) -> Path:
    """Write a tiny random MarianMTModel checkpoint with opus-mt-en-zh's peculiarities."""
    import torch
    from transformers import MarianMTModel

    from models.builder.marian_dir import (
        PAD,
        SpmOptions,
        build_shared_vocab,
        marian_config,
        marian_generation_config,
        spm_pieces,
        train_spm,
        write_tokenizer_files,
    )

    directory.mkdir(parents=True, exist_ok=True)
    pairs = tiny_pairs()
    train_spm([en for en, _ in pairs], directory / "source.spm", SpmOptions(vocab_size=400))
    train_spm(
        [zh for _, zh in pairs],
        directory / "target.spm",
        SpmOptions(vocab_size=900, character_coverage=0.98),
    )
    vocab = build_shared_vocab(
        spm_pieces(directory / "source.spm"),
        spm_pieces(directory / "target.spm"),
        [">>cmn_Hans<<"],
    )
    write_tokenizer_files(directory, directory / "source.spm", directory / "target.spm", vocab, "en", "zh")
    torch.manual_seed(seed)
    model = MarianMTModel(marian_config(vocab, d_model=32, layers=2, heads=4, ffn_dim=64)).eval()
    with torch.no_grad():
        # Peaked, non-zero bias; pad gets the highest so that an unmasked pad would win.
        model.final_logits_bias.normal_(0.0, 2.0)
        model.final_logits_bias[0, vocab[PAD]] = 50.0
    model.generation_config = marian_generation_config(vocab)
    model.save_pretrained(directory)
    return directory


def export_tiny(checkpoint: Path, out: Path, **overrides) -> Path:
    """Export `checkpoint` to `out` with thresholds suited to a random-weight model."""
    from models.builder.export import ExportOptions, build_bundle
    from models.builder.hub import resolve
    from models.builder.validate import ValidateOptions

    options = ExportOptions(
        validation=ValidateOptions(int8_min_exact=0.0, int8_min_agreement=0.0, parity_corpus=TINY_CORPUS),
        **overrides,
    )
    build_bundle(resolve(str(checkpoint)), out, options)
    return out


@pytest.fixture(scope="session")
def tiny_marian_dir(tmp_path_factory) -> Path:
    """A tiny random MarianMTModel checkpoint directory (opus-mt layout)."""
    return build_tiny_marian(tmp_path_factory.mktemp("tiny-marian") / "checkpoint")


@pytest.fixture(scope="session")
def tiny_bundle(tiny_marian_dir, tmp_path_factory) -> Path:
    """The exported, validated bundle of `tiny_marian_dir` (fp32 and int8 decoders)."""
    return export_tiny(tiny_marian_dir, tmp_path_factory.mktemp("tiny-bundle") / "bundle")
