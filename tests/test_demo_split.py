"""The demo model's clean dev/test split shares no normalised sentence with training."""

from pathlib import Path

import pytest

from models.builder.defaults import TATOEBA_CORPUS
from models.demo.split import clean_split, held_out, normalise
from models.demo.train import read_pairs

TINY_CORPUS = Path(__file__).resolve().parent / "data" / "tiny_corpus.tsv"


def _assert_clean(pairs, split):
    train_en = {normalise(en) for en, _ in split.train}
    train_zh = {normalise(zh) for _, zh in split.train}
    for en, zh in split.dev + split.test:
        assert normalise(en) not in train_en, en
        assert normalise(zh) not in train_zh, zh
    dev_sides = {normalise(side) for pair in split.dev for side in pair}
    assert not any(normalise(side) in dev_sides for pair in split.test for side in pair)
    held = len(pairs) - len(split.train)
    assert len(split.dev) + len(split.test) + split.dropped == held
    assert set(split.dev + split.test) <= set(held_out(pairs, held)[1])


def test_normalise_ignores_case_punctuation_and_whitespace():
    assert normalise("Tom's here!") == normalise("toms  here.") == "tomshere"
    assert normalise("你好，世界。") == normalise("你好, 世界!") == "你好世界"
    assert normalise("ＡＢＣ？") == "abc"


def test_near_duplicates_of_training_pairs_never_reach_dev_or_test():
    base = [(f"Sentence number {n}.", f"第{n}句。") for n in range(200)]
    twins = [(f"sentence number {n}!", f"第 {n} 句！") for n in range(200)]
    pairs = base + twins
    split = clean_split(pairs, held_out_pairs=60)
    _assert_clean(pairs, split)
    assert split.dropped > 0


def test_split_of_real_tatoeba_pairs_is_clean_and_deterministic():
    pairs = read_pairs(TINY_CORPUS)
    split = clean_split(pairs, held_out_pairs=80)
    _assert_clean(pairs, split)
    assert split.dev and split.test
    assert clean_split(pairs, held_out_pairs=80) == split


@pytest.mark.skipif(not TATOEBA_CORPUS.exists(), reason="Tatoeba corpus not beside the checkout")
def test_demo_split_of_the_full_corpus_is_clean():
    pairs = read_pairs(TATOEBA_CORPUS)
    split = clean_split(pairs)
    _assert_clean(pairs, split)
    assert (len(split.train), len(split.dev), len(split.test)) == (28155, 406, 408)
