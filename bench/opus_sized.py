"""A random MarianMTModel of opus-mt-en-zh's exact shape whose outputs end naturally.

    python bench/opus_sized.py [--work build/opus-sized]   # build it once, print its lengths

The real opus-mt-en-zh cannot be downloaded here, so the benchmarks use a stand-in: a
random MarianMTModel with its shapes (vocab 65001, d_model 512, 6+6 layers, 8 heads, FFN
2048, tied embeddings, opus-mt's special tokens), on the tests' tiny tokenizers with the
vocabulary padded to 65001. With random weights every output would run to the length cap
(2 × source ids + 16), so a benchmark would measure only the longest decodes. Along the
greedy path eos trails the best token by about 2 logits at the first step and 5–6 after,
so a bias on eos alone ends every sentence at once or none. Instead the eos row of the
tied embedding (the output projection's eos row) is fitted by ridge regression on the
decoder's final hidden states along the greedy paths of Tatoeba English sentences, so that
the eos logit crosses the best other logit about `ratio` × source ids steps in, and
final_logits_bias[eos] (the regression's intercept, then calibrated) sets the overall
length. Since the embedding is tied, the eos row is also the encoder's input for the eos
that ends every source: the fit is repeated on hidden states collected with the previous
fit (`rounds`), and the bias calibrated on a last collection.

Everything is seeded (the model's weights, the sentences), and the fit takes a couple of
minutes on 2 cores. The build is cached under build/opus-sized/, keyed by its parameters.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

import build_cache  # noqa: E402

from models import defaults  # noqa: E402
from models.builder.defaults import TARGET_LANG_TOKEN  # noqa: E402
from models.builder.quantize import QuantizeOptions  # noqa: E402
from models.builder.validate import regression_sentences  # noqa: E402

OPUS_SHAPES = dict(d_model=512, layers=6, heads=8, ffn_dim=2048)
OPUS_VOCAB = 65001
WORK = ROOT / "build" / "opus-sized"
#: Bumped when the construction changes, so that cached checkpoints are remade.
VERSION = 1
#: Rows decoded together while collecting hidden states.
BATCH = 32


@dataclass(frozen=True)
class EndOptions:
    """How the outputs are made to end; part of the cache key."""

    #: Target output tokens per source id (prefix and eos included); the tiny source
    #: tokenizer cuts English about twice as finely as opus-mt's, so 0.55 gives outputs
    #: about as long as a real translation's.
    ratio: float = 0.55
    #: Logits per step by which the eos margin target rises through the crossing.
    slope: float = 1.0
    #: Ridge penalty, relative to the number of hidden states fitted.
    ridge: float = 0.01
    #: Fits, each on hidden states collected with the previous one.
    rounds: int = 3
    #: Hidden states are collected up to this many times the target length (plus 4 steps).
    horizon: float = 1.5
    #: Single Tatoeba training sentences fitted on.
    sentences: int = 128
    #: Sources of 2–6 training sentences joined, so that long sentences end too.
    joined: int = 32
    seed: int = 0


@dataclass
class GreedyPath:
    """One source's greedy path with eos never chosen: final hidden states, eos logits and
    best other logits, one row per step."""

    hidden: np.ndarray
    eos: np.ndarray
    best: np.ndarray

    def stop(self, shift: float) -> int:
        """The step eos is first chosen with final_logits_bias[eos] moved by `shift`
        (the path's length if it never is)."""
        chosen = np.flatnonzero(self.eos + shift > self.best)
        return int(chosen[0]) if chosen.size else len(self.best)

    def upto(self, steps: int) -> GreedyPath:
        """The path's first `steps` steps."""
        return GreedyPath(self.hidden[:steps], self.eos[:steps], self.best[:steps])


def build_random(directory: Path) -> None:
    """A random opus-mt-en-zh-shaped checkpoint, with the tiny tokenizers padded to 65001."""
    import torch
    from conftest import build_tiny_marian
    from transformers import MarianMTModel

    from models.builder.marian_dir import PAD, marian_config, marian_generation_config

    build_tiny_marian(directory)
    vocab = json.loads((directory / "vocab.json").read_text())
    del vocab[PAD]
    while len(vocab) < OPUS_VOCAB - 1:
        vocab[f"▁filler{len(vocab)}"] = len(vocab)
    vocab[PAD] = len(vocab)
    (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    torch.manual_seed(0)
    model = MarianMTModel(marian_config(vocab, **OPUS_SHAPES)).eval()
    model.generation_config = marian_generation_config(vocab)
    model.save_pretrained(directory)


def fit_sources(tokenizer, options: EndOptions) -> list[list[int]]:
    """Source ids of seeded Tatoeba training sentences, single and joined (never dev ones)."""
    from models.demo.split import held_out
    from models.demo.train import DEFAULT_CORPUS, read_pairs

    train, _ = held_out(read_pairs(DEFAULT_CORPUS))
    english = sorted({en for en, _ in train})
    rng = random.Random(options.seed)
    texts = rng.sample(english, options.sentences)
    texts += [" ".join(rng.sample(english, rng.randint(2, 6))) for _ in range(options.joined)]
    return source_ids(tokenizer, texts)


def source_ids(tokenizer, texts: list[str]) -> list[list[int]]:
    """The ids a bundle's Translator feeds the model for each text (language token first)."""
    return [tokenizer(f"{TARGET_LANG_TOKEN} {text}").input_ids for text in texts]


def length_cap(source_length: int) -> int:
    """The Translator's output length cap for a source of `source_length` ids."""
    return int(defaults.LENGTH_A * source_length + defaults.LENGTH_B)


def greedy_paths(model, sources: list[list[int]], steps: list[int], stop: bool) -> list[GreedyPath]:
    """Each source's greedy path for its number of `steps`, decoded in batches of similar length.

    With `stop`, a path ends where eos is chosen (its last row is that step); without, eos
    is never chosen, so the path shows where eos would have been chosen under any bias.
    """
    import torch
    from transformers.cache_utils import DynamicCache, EncoderDecoderCache

    eos, pad = model.config.eos_token_id, model.config.pad_token_id
    weight, bias = model.lm_head.weight, model.final_logits_bias[0]
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    paths: list[GreedyPath | None] = [None] * len(sources)
    for start in range(0, len(order), BATCH):
        rows = order[start : start + BATCH]
        width = max(len(sources[i]) for i in rows)
        ids = torch.full((len(rows), width), pad)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for row, i in enumerate(rows):
            ids[row, : len(sources[i])] = torch.tensor(sources[i])
            mask[row, : len(sources[i])] = 1
        limit = torch.tensor([steps[i] for i in rows])
        with torch.inference_mode():
            encoded = model.model.encoder(input_ids=ids, attention_mask=mask).last_hidden_state
            cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
            tokens = torch.full((len(rows), 1), model.config.decoder_start_token_id)
            hidden, eos_logits, best_logits = [], [], []
            ended = torch.zeros(len(rows), dtype=torch.bool)
            for step in range(int(limit.max())):
                out = model.model.decoder(
                    input_ids=tokens,
                    encoder_hidden_states=encoded,
                    encoder_attention_mask=mask,
                    cache=cache,
                    use_cache=True,
                )
                cache = out.past_key_values
                state = out.last_hidden_state[:, -1]
                logits = state @ weight.T + bias
                logits[:, pad] = -math.inf
                eos_logit = logits[:, eos].clone()
                logits[:, eos] = -math.inf
                best, choice = logits.max(dim=1)
                hidden.append(state.numpy().copy())
                eos_logits.append(eos_logit.numpy())
                best_logits.append(best.numpy())
                ended |= (step + 1 >= limit) | (stop & (eos_logit > best))
                if bool(ended.all()):
                    break
                tokens = choice[:, None]
        for row, i in enumerate(rows):
            path = GreedyPath(
                np.stack([h[row] for h in hidden[: steps[i]]]),
                np.array([z[row] for z in eos_logits[: steps[i]]]),
                np.array([m[row] for m in best_logits[: steps[i]]]),
            )
            paths[i] = path.upto(path.stop(0.0) + 1) if stop else path
    return paths


def fit_eos_row(
    paths: list[GreedyPath], sources: list[list[int]], options: EndOptions
) -> tuple[np.ndarray, float]:
    """Ridge regression of the eos logit on the final hidden states: (eos row, eos bias).

    At step t of a source of L ids the target is the best other logit plus
    slope × (t − ratio × L + ½): below it before the target length, above it from there on.
    Every source weighs the same, however many steps its path has.
    """
    features, targets, weights = [], [], []
    for path, ids in zip(paths, sources, strict=True):
        steps = np.arange(len(path.best))
        features.append(path.hidden)
        targets.append(path.best + options.slope * (steps - options.ratio * len(ids) + 0.5))
        weights.append(np.full(len(steps), 1.0 / len(steps)))
    x = np.concatenate(features).astype(np.float64)
    y = np.concatenate(targets)
    weight = np.concatenate(weights)
    weight /= weight.mean()
    mean = weight @ x / weight.sum()
    y_mean = weight @ y / weight.sum()
    centred = x - mean
    weighted = centred * weight[:, None]
    gram = weighted.T @ centred + options.ridge * len(x) * np.eye(x.shape[1])
    row = np.linalg.solve(gram, weighted.T @ (y - y_mean))
    return row, float(y_mean - mean @ row)


def calibrate(paths: list[GreedyPath], sources: list[list[int]], ratio: float) -> float:
    """The shift of the eos bias that makes the paths' total length `ratio` × their source ids."""
    target = ratio * sum(map(len, sources))
    low, high = -50.0, 50.0
    for _ in range(60):
        middle = (low + high) / 2
        if sum(path.stop(middle) for path in paths) > target:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def make_it_end(model, sources: list[list[int]], options: EndOptions) -> dict:
    """Fit the eos row and bias of `model` in place on `sources`; returns a report."""
    import torch

    eos = model.config.eos_token_id
    if model.lm_head.weight.data_ptr() != model.model.shared.weight.data_ptr():
        raise ValueError("the output projection is not the tied embedding")
    steps = [
        min(length_cap(len(ids)), math.ceil(options.horizon * options.ratio * len(ids)) + 4)
        for ids in sources
    ]
    for _ in range(options.rounds):
        paths = greedy_paths(model, sources, steps, stop=False)
        row, bias = fit_eos_row(paths, sources, options)
        with torch.no_grad():
            model.lm_head.weight[eos] = torch.from_numpy(row).float()
            model.final_logits_bias[0, eos] = bias
    paths = greedy_paths(model, sources, steps, stop=False)
    shift = calibrate(paths, sources, options.ratio)
    with torch.no_grad():
        model.final_logits_bias[0, eos] += shift
    stops = [path.stop(shift) for path in paths]
    row = model.lm_head.weight.detach()[eos]
    return {
        "options": asdict(options),
        "eos_row_norm": float(row.norm()),
        "eos_bias": float(model.final_logits_bias[0, eos]),
        "fit_sentences": len(sources),
        "fit_ratio": sum(stops) / sum(map(len, sources)),
        "fit_unended": sum(stop == len(path.best) for stop, path in zip(stops, paths, strict=True)),
    }


def build(directory: Path, options: EndOptions) -> None:
    """Write the random opus-sized checkpoint, made to end, into `directory`."""
    import torch
    from transformers import MarianMTModel, MarianTokenizer

    build_random(directory)
    model = MarianMTModel.from_pretrained(directory, dtype=torch.float32, attn_implementation="eager").eval()
    tokenizer = MarianTokenizer.from_pretrained(directory)
    threads = torch.get_num_threads()
    # One thread: the same sums, so the same checkpoint, whatever the machine's core count.
    torch.set_num_threads(1)
    try:
        report = make_it_end(model, fit_sources(tokenizer, options), options)
    finally:
        torch.set_num_threads(threads)
    model.save_pretrained(directory)
    (directory / "ending.json").write_text(json.dumps(report, indent=2) + "\n")


def parameters(options: EndOptions = EndOptions()) -> dict:
    """What the checkpoint is keyed by."""
    return {**OPUS_SHAPES, "vocab": OPUS_VOCAB, **asdict(options), "version": VERSION}


def checkpoint(work: Path = WORK) -> Path:
    """The made-to-end opus-sized checkpoint under `work`, built the first time."""
    options = EndOptions()
    path = build_cache.cached(work, "checkpoint", parameters(options))
    return build_cache.build_once(path, lambda staging: build(staging, options))


def bundle(quantize: QuantizeOptions | None = None, work: Path = WORK) -> Path:
    """The checkpoint exported (not validated) with `quantize` (default: the default
    QuantizeOptions) under `work`, once."""
    options = quantize or QuantizeOptions()
    return build_cache.bundle(work, "bundle", checkpoint(work), parameters(), options)


def lengths(outputs: list[tuple[int, int, bool]]) -> str:
    """A line on (source ids, output tokens, hit the cap) triples: length percentiles and ratio."""
    sizes = np.array([size for _, size, _ in outputs])
    ratio = sizes.sum() / sum(source for source, _, _ in outputs)
    capped = sum(hit for _, _, hit in outputs)
    p5, p50, p95 = np.percentile(sizes, [5, 50, 95])
    return (
        f"{len(outputs)} sentences: output tokens {sizes.min()}–{sizes.max()} (5%/50%/95%: "
        f"{p5:.0f}/{p50:.0f}/{p95:.0f}), {ratio:.2f} per source id, {capped} at the length cap"
    )


def main() -> None:
    """Build the checkpoint (once) and print PyTorch's greedy output lengths on held-out text."""
    import torch
    from transformers import MarianMTModel, MarianTokenizer

    from models.demo.split import held_out
    from models.demo.train import DEFAULT_CORPUS, read_pairs

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=WORK)
    args = parser.parse_args()
    directory = checkpoint(args.work)
    print(directory)
    print((directory / "ending.json").read_text())
    model = MarianMTModel.from_pretrained(directory, dtype=torch.float32, attn_implementation="eager").eval()
    tokenizer = MarianTokenizer.from_pretrained(directory)
    _, dev = held_out(read_pairs(DEFAULT_CORPUS))
    for name, texts in (("Tatoeba dev", [en for en, _ in dev][:400]), ("regression", regression_sentences())):
        sources = source_ids(tokenizer, texts)
        caps = [length_cap(len(ids)) for ids in sources]
        paths = greedy_paths(model, sources, caps, stop=True)
        outputs = []
        for ids, cap, path in zip(sources, caps, paths, strict=True):
            ended = path.stop(0.0) < len(path.best)
            outputs.append((len(ids), len(path.best) - 1 if ended else cap, not ended))
        print(f"PyTorch fp32, {name}: {lengths(outputs)}")


if __name__ == "__main__":
    main()
