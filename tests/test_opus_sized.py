"""bench/opus_sized.py, which makes a random model's outputs end, on a tiny random Marian
model: after the fit, greedy outputs end before the length cap, and the fit's own greedy
decoding is PyTorch's `generate`."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import opus_sized  # noqa: E402
from conftest import tiny_pairs  # noqa: E402


@pytest.fixture(scope="module")
def ended(tiny_marian_dir):
    """The tiny model (loaded, so the session's checkpoint is untouched), made to end on the
    first 200 tiny-corpus sentences; (model, tokenizer, report)."""
    import torch
    from transformers import MarianMTModel, MarianTokenizer

    torch.manual_seed(0)
    model = MarianMTModel.from_pretrained(tiny_marian_dir, attn_implementation="eager").eval()
    tokenizer = MarianTokenizer.from_pretrained(tiny_marian_dir)
    english = [en for en, _ in tiny_pairs()]
    report = opus_sized.make_it_end(
        model, opus_sized.source_ids(tokenizer, english[:200]), opus_sized.EndOptions()
    )
    return model, tokenizer, report


def test_stop_is_the_first_step_eos_wins_under_the_shifted_bias():
    path = opus_sized.GreedyPath(np.zeros((4, 2)), np.array([-3.0, -2.0, 1.0, 0.0]), np.zeros(4))
    assert [path.stop(shift) for shift in (-5.0, -0.5, 2.5, 3.5)] == [4, 2, 1, 0]


def test_the_fit_ends_every_fitted_sentence_at_the_asked_ratio(ended):
    _, _, report = ended
    assert report["fit_unended"] == 0
    assert report["fit_ratio"] == pytest.approx(0.55, abs=0.02)


def test_held_out_outputs_end_and_match_pytorch_generate(ended):
    import torch

    model, tokenizer, _ = ended
    sources = opus_sized.source_ids(tokenizer, [en for en, _ in tiny_pairs()][200:260])
    caps = [opus_sized.length_cap(len(ids)) for ids in sources]
    paths = opus_sized.greedy_paths(model, sources, caps, stop=True)
    eos = model.config.eos_token_id
    sizes = []
    for ids, cap, path in zip(sources, caps, paths, strict=True):
        with torch.no_grad():
            generated = model.generate(
                torch.tensor([ids]),
                num_beams=1,
                do_sample=False,
                max_new_tokens=cap,
                forced_eos_token_id=None,
            )[0, 1:].tolist()
        assert generated[-1] == eos and len(generated) <= cap
        assert len(path.best) == len(generated)
        sizes.append(len(generated) - 1)
    assert 0.3 < sum(sizes) / sum(map(len, sources)) < 0.8
