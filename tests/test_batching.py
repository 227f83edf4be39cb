"""Batching never changes a sentence's output: alone vs random batches of 1..64 rows.

Checked for the int8 ("row" scheme) and fp32 decoders of the tiny random model and of
the demo model (its committed int8 bundle, and an fp32 export of its checkpoint). A row
is compared with the same sentence decoded alone: greedy ids and the length-cap flag, and
the raw logits bit for bit under teacher forcing.
"""

import random

import numpy as np
import pytest
from conftest import tiny_pairs

from models.batching import Row, group, padded_length, split_points
from models.bundle import default_bundle_dir
from models.translator import BatchOptions, SessionOptions, Translator

DEMO_CHECKPOINT = default_bundle_dir().parent / "checkpoint"
ROUNDS = 24


@pytest.fixture(scope="module")
def demo_fp32_bundle(tmp_path_factory):
    from models.builder.export import ExportOptions, build_bundle
    from models.builder.hub import resolve

    if not (DEMO_CHECKPOINT / "model.safetensors").exists():
        pytest.skip("demo checkpoint not present")
    out = tmp_path_factory.mktemp("demo-fp32") / "bundle"
    build_bundle(resolve(str(DEMO_CHECKPOINT)), out, ExportOptions(validate=False))
    return out


@pytest.fixture(
    scope="module",
    params=["tiny-int8", "tiny-fp32", "demo-int8", "demo-fp32"],
)
def translator(request, tiny_bundle):
    model, precision = request.param.split("-")
    if model == "tiny":
        bundle = tiny_bundle
    elif precision == "int8":
        bundle = default_bundle_dir()
    else:
        bundle = request.getfixturevalue("demo_fp32_bundle")
    return Translator(bundle, precision=precision, threads=1, warmup=False)


def by_length(translator):
    """English sentences of the tiny corpus as source ids, grouped by padded length; every
    group used holds rows of several exact lengths."""
    pools: dict[int, list[np.ndarray]] = {}
    for english, _ in tiny_pairs():
        ids = translator.codec.encode(english)
        pools.setdefault(translator.padded_length(len(ids)), []).append(ids)
    return {
        length: rows
        for length, rows in pools.items()
        if len(rows) >= 4 and len({len(ids) for ids in rows}) > 1
    }


def test_each_row_decodes_as_it_does_alone(translator, request):
    assert translator.max_batch > 1  # both decoders of both bundles are batch-invariant
    rng = random.Random(13)
    pools = by_length(translator)
    alone: dict[bytes, tuple[list[int], bool]] = {}
    sizes = [1, 2, 3, 64, *(rng.randint(1, 64) for _ in range(ROUNDS - 4))]
    for size in sizes:
        length = rng.choice(sorted(pools))
        rows = [rng.choice(pools[length]) for _ in range(size)]  # repeats welcome
        for ids in rows:
            if ids.tobytes() not in alone:
                alone[ids.tobytes()] = translator.generate(ids)
        batched = translator.generate_batch(rows)
        assert batched == [alone[ids.tobytes()] for ids in rows], f"batch of {size}, length {length}"
    if request.node.callspec.params["translator"].startswith("demo"):
        # the demo model ends sentences at different steps: rows leave batches mid-way
        assert len({len(ids) for ids, capped in alone.values() if not capped}) > 3


def test_rows_are_encoded_unpadded_and_their_cross_kv_zero_filled(translator):
    """A batch's rows of each exact length are encoded apart, unpadded: each row's cross
    K/V are its own encoding alone, then zeros up to the padded length."""
    pool = sorted(next(iter(by_length(translator).values())), key=len)
    rows = [*pool[:4], *pool[-4:]]  # the shortest and the longest of one padded length
    assert len(rows[0]) < len(rows[-1])
    cache = translator.start(rows)
    for number, ids in enumerate(rows):
        alone = translator._encoder.run(
            None, {"input_ids": ids[None], "attention_mask": np.ones_like(ids[None])}
        )
        for whole, own in zip(cache.cross, alone, strict=True):
            assert whole[number, :, : len(ids)].tobytes() == own[0].tobytes()
            assert not whole[number, :, len(ids) :].any()


def test_raw_logits_are_bitwise_equal_in_any_batch(translator):
    rng = random.Random(7)
    pools = by_length(translator)
    vocab = translator.config.vocab_size
    for size in (2, 7, 64):
        length = rng.choice(sorted(pools))
        rows = [rng.choice(pools[length]) for _ in range(size)]
        tokens = [[rng.randrange(vocab) for _ in range(6)] for _ in rows]
        cache = translator.start(rows)
        steps = [cache.step(np.array(column, dtype=np.int64)) for column in zip(*tokens, strict=True)]
        for number, (ids, fed) in enumerate(zip(rows, tokens, strict=True)):
            alone = np.stack(list(translator.step_logits(ids, fed)))
            together = np.stack([step[number] for step in steps])
            assert alone.tobytes() == together.tobytes(), f"row {number} of {size}"


def test_translate_gives_the_same_text_whatever_the_batching(translator):
    rng = random.Random(3)
    sentences = [english for english, _ in tiny_pairs()[:150]] + ["", "OK.", "OK."]
    alone = [translator.translate_one(sentence).text for sentence in sentences]
    for max_batch, read_ahead, threads in ((64, 256, 2), (5, 17, 1), (1, 3, 2), (64, 1000, 1)):
        shuffled = rng.sample(range(len(sentences)), len(sentences))
        batched = Translator(
            translator.manifest.directory,
            precision=translator.precision,
            threads=threads,
            batching=BatchOptions(max_batch=max_batch, read_ahead=read_ahead),
            warmup=False,
        )
        texts = [result.text for result in batched.translate(sentences[i] for i in shuffled)]
        assert texts == [alone[i] for i in shuffled], (max_batch, read_ahead, threads)


def test_group_keeps_padded_lengths_and_puts_rows_of_nearby_lengths_together():
    lengths = [3, 9, 4, 3, 12, 8]
    rows = [Row(n, 0, np.zeros(length, np.int64)) for n, length in enumerate(lengths)]
    batches = group(rows, max_batch=2, padded=lambda length: padded_length(length, 8, 512))
    assert [[row.sentence for row in batch.rows] for batch in batches] == [[0, 3], [2, 5], [1, 4]]


def test_a_rows_padding_is_its_own():
    assert [padded_length(n, 8, 512) for n in (1, 8, 9, 16, 17)] == [8, 8, 16, 16, 24]
    assert padded_length(510, 8, 512) == 512 and padded_length(511, 8, 511) == 511
    assert [padded_length(n, 1, 512) for n in (1, 7, 300)] == [1, 7, 300]


def test_rows_of_different_padded_lengths_are_refused(translator):
    short, long = np.zeros(3, np.int64), np.zeros(20, np.int64)
    with pytest.raises(ValueError, match="padded length"):
        translator.generate_batch([short, long])


def test_split_points_prefer_punctuation_then_word_starts():
    pieces = ["▁a", "b", ",", "▁c", "d", "▁e", "f", "g"]
    assert split_points(pieces, 4) == [3, 7]
    assert split_points(pieces, 5) == [3]
    assert split_points(pieces, 100) == []
    assert split_points(["x"] * 10, 4) == [4, 8]


def test_more_onnx_runtime_threads_change_no_output(translator):
    """`transqueue translate -` runs its batches on two ONNX Runtime threads, the workers on
    one: the same rows give the same tokens, alone and batched."""
    wide = Translator(
        translator.manifest.directory,
        precision=translator.precision,
        threads=1,
        session=SessionOptions(intra_op_threads=2),
        warmup=False,
    )
    rows = [ids for pool in by_length(translator).values() for ids in pool]
    assert [wide.generate(ids) for ids in rows] == [translator.generate(ids) for ids in rows]
    for pool in by_length(translator).values():
        assert wide.generate_batch(pool) == translator.generate_batch(pool)
