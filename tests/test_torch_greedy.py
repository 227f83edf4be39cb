"""bench/torch_greedy.py, PyTorch's greedy decoding as the benchmarks run it: on the tiny
random Marian model, the tokens it counts are those the fp32 Translator generates, alone
and in padded batches."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import torch_greedy  # noqa: E402
from conftest import tiny_pairs  # noqa: E402

from models.translator import DecodeOptions, Translator  # noqa: E402

#: Every sentence's length cap in both engines, so that padded batches cap rows alike.
CAP = 12


@pytest.fixture(scope="module")
def engines(tiny_marian_dir, tiny_bundle):
    """(PyTorch model, fp32 Translator capped at CAP, source id rows of 20 sentences)."""
    translator = Translator(
        tiny_bundle, precision="fp32", threads=1, decode=DecodeOptions(length_a=0.0, length_b=CAP)
    )
    sentences = [english for english, _ in tiny_pairs()[:20]]
    rows = [translator.codec.encode(sentence).tolist() for sentence in sentences]
    return torch_greedy.load(tiny_marian_dir, threads=1), translator, sentences, rows


def test_alone_it_counts_the_tokens_the_fp32_translator_generates(engines):
    model, translator, sentences, rows = engines
    expected = sum(result.target_tokens for result in translator.translate(sentences))
    assert torch_greedy.generate(model, rows, translator.max_new_tokens, batch=1) == expected


def test_padded_batches_count_the_same_tokens(engines):
    model, translator, _, rows = engines
    alone = torch_greedy.generate(model, rows, lambda width: CAP, batch=1)
    assert torch_greedy.generate(model, rows, lambda width: CAP, batch=16) == alone
