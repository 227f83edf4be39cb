"""Train the demo en→zh Marian model from the Tatoeba corpus in ../shared/data/en-zh.

    python -m models.demo.train [--corpus PATH] [--work build/train-demo] [--out DIR]
                                [--epochs N] [--init CHECKPOINT --init-epochs N]

Trains on the training side of models.demo.split and selects on its clean dev split.
Reproducible (fixed seeds, single-threaded SentencePiece, deterministic batching) and
resumable: the state is saved every `snapshot_steps` steps in --work, and a rerun
continues from it. The result is a genuine MarianMTModel checkpoint in the opus-mt directory layout
(source.spm, target.spm, vocab.json, pad = decoder start, eos 0, tied embeddings),
so `transqueue export` serves it exactly as it serves Helsinki-NLP/opus-mt-en-zh.

Data: Tatoeba via manythings.org/anki, CC BY 2.0 FR. The attribution travels with the
checkpoint in ATTRIBUTION.md.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from models.builder import defaults
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
from models.demo.split import HELD_OUT_PAIRS, SEED, clean_split

DEFAULT_CORPUS = defaults.TATOEBA_CORPUS
DEFAULT_WORK = Path("build/train-demo")
DEFAULT_OUT = Path(__file__).resolve().parent / "checkpoint"

ATTRIBUTION = """\
# Demo en→zh model: data attribution

Trained by `python -m models.demo.train` on English–Chinese sentence pairs from the
Tatoeba Project (https://tatoeba.org), as packaged by www.manythings.org/anki
(`cmn.txt`, Simplified-script conversion). License: CC BY 2.0 FR
(https://creativecommons.org/licenses/by/2.0/fr/).

Attribution: "www.manythings.org/anki and tatoeba.org". The per-sentence contributors
are credited in the third column of the corpus file. Changes to the originals: the
Chinese side was converted from Traditional to Simplified by a third party and
zero-width spaces were removed; transqueue made no further changes to the text.
"""


@dataclass(frozen=True)
class TrainOptions:
    """Model size and optimisation settings of the demo model."""

    source_vocab: int = 4000
    target_vocab: int = 4000
    d_model: int = 256
    layers: int = 3
    heads: int = 4
    ffn_dim: int = 1024
    dropout: float = 0.1
    epochs: int = 8
    batch_pairs: int = 64
    peak_lr: float = 7e-4
    warmup_steps: int = 800
    label_smoothing: float = 0.1
    held_out_pairs: int = HELD_OUT_PAIRS
    init_epochs: int = 8
    rewarm_steps: int = 100
    snapshot_steps: int = 110
    patience: int = 8
    average_last: int = 4
    max_steps: int = 1_000_000


def read_pairs(corpus: Path) -> list[tuple[str, str]]:
    """Read (english, chinese) pairs from a manythings.org tab-separated file."""
    pairs = []
    with corpus.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            fields = line.rstrip("\n").split("\t")
            if len(fields) < 2:
                raise ValueError(f"{corpus}:{number}: expected English<TAB>Chinese, got {line!r}")
            pairs.append((fields[0], fields[1]))
    return pairs


def prepare_tokenizers(train: list[tuple[str, str]], out: Path, options: TrainOptions) -> None:
    """Train source.spm/target.spm on the training split and write the opus-mt files."""
    out.mkdir(parents=True, exist_ok=True)
    train_spm([en for en, _ in train], out / "source.spm", SpmOptions(options.source_vocab))
    train_spm(
        [zh for _, zh in train],
        out / "target.spm",
        SpmOptions(options.target_vocab, character_coverage=0.9995),
    )
    vocab = build_shared_vocab(
        spm_pieces(out / "source.spm"), spm_pieces(out / "target.spm"), [defaults.TARGET_LANG_TOKEN]
    )
    write_tokenizer_files(out, out / "source.spm", out / "target.spm", vocab, "en", "zh")


def encode_pairs(pairs: list[tuple[str, str]], tokenizer) -> list[tuple[list[int], list[int]]]:
    """Token ids for each pair: source with the language token and eos, target with eos."""
    sources = tokenizer([f"{defaults.TARGET_LANG_TOKEN} {en}" for en, _ in pairs]).input_ids
    targets = tokenizer(text_target=[zh for _, zh in pairs]).input_ids
    return list(zip(sources, targets, strict=True))


def make_batches(
    examples: list[tuple[list[int], list[int]]], batch_pairs: int, rng: random.Random
) -> list[list[int]]:
    """Group example indices of similar length into batches, in a seeded random order."""
    order = sorted(range(len(examples)), key=lambda i: (len(examples[i][0]), rng.random()))
    batches = [order[i : i + batch_pairs] for i in range(0, len(order), batch_pairs)]
    rng.shuffle(batches)
    return batches


def collate(examples, indices, pad_id: int):
    """Pad one batch into input_ids, attention_mask, decoder_input_ids and labels."""
    rows = [examples[i] for i in indices]
    src_len = max(len(s) for s, _ in rows)
    tgt_len = max(len(t) for _, t in rows)
    input_ids = torch.full((len(rows), src_len), pad_id)
    labels = torch.full((len(rows), tgt_len), -100)
    decoder_input_ids = torch.full((len(rows), tgt_len), pad_id)
    for row, (source, target) in enumerate(rows):
        input_ids[row, : len(source)] = torch.tensor(source)
        labels[row, : len(target)] = torch.tensor(target)
        decoder_input_ids[row, 1 : len(target)] = torch.tensor(target[:-1])
    return input_ids, (input_ids != pad_id).long(), decoder_input_ids, labels


def learning_rate(step: int, options: TrainOptions) -> float:
    """Linear warm-up then inverse-square-root decay."""
    step = max(step, 1)
    return options.peak_lr * min(step / options.warmup_steps, math.sqrt(options.warmup_steps / step))


def dev_loss(model, examples, pad_id: int) -> float:
    """Mean per-token cross entropy on the dev split (no label smoothing)."""
    model.eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for indices in make_batches(examples, 128, random.Random(0)):
            input_ids, mask, decoder_input_ids, labels = collate(examples, indices, pad_id)
            logits = model(
                input_ids=input_ids, attention_mask=mask, decoder_input_ids=decoder_input_ids
            ).logits
            total += F.cross_entropy(
                logits.flatten(0, 1), labels.flatten(), ignore_index=-100, reduction="sum"
            ).item()
            tokens += int((labels != -100).sum())
    model.train()
    return total / tokens


def _write_tsv(path: Path, pairs: list[tuple[str, str]]) -> None:
    path.write_text("".join(f"{en}\t{zh}\n" for en, zh in pairs), "utf-8")


def _load_initial(model, init: Path | None) -> None:
    """Start from the weights of a trained checkpoint (same vocabulary and shape)."""
    from transformers import MarianMTModel

    if init is not None:
        model.load_state_dict(MarianMTModel.from_pretrained(init).float().state_dict())
        print(f"initialised from {init}")


def average_weights(paths: list[Path]) -> dict[str, torch.Tensor]:
    """The element-wise mean of the model weights saved at `paths` (checkpoint averaging)."""
    total: dict[str, torch.Tensor] = {}
    for path in paths:
        for name, tensor in torch.load(path, weights_only=True).items():
            total[name] = total.get(name, 0) + tensor.double()
    return {name: (tensor / len(paths)).float() for name, tensor in total.items()}


def train(corpus: Path, work: Path, out: Path, options: TrainOptions, init: Path | None = None) -> None:
    """Run (or resume) the whole training and write the checkpoint to `out`.

    With `init`, training starts from that checkpoint's weights as if it had already run
    `options.init_epochs` epochs of this schedule (fresh optimizer, re-warm-up over
    `options.rewarm_steps`). Every `options.snapshot_steps` steps and at each epoch's end
    the weights and the resumable state are saved; training stops early when the
    clean-dev loss has not improved for `options.patience` snapshots, or after step
    `options.max_steps`. The checkpoint written is whichever has the lowest dev loss: the
    best snapshot or the average of `options.average_last` consecutive snapshots.
    """
    from transformers import MarianMTModel, MarianTokenizer

    torch.manual_seed(SEED)
    work.mkdir(parents=True, exist_ok=True)
    split = clean_split(read_pairs(corpus), options.held_out_pairs)
    print(
        f"corpus {corpus}: {len(split.train)} train pairs, {len(split.dev)} dev, "
        f"{len(split.test)} test (clean; {split.dropped} overlapping pairs dropped)"
    )
    _write_tsv(work / "dev.tsv", split.dev)
    _write_tsv(work / "test.tsv", split.test)

    tok_dir = work / "tokenizer"
    if not (tok_dir / "vocab.json").exists():
        if init is None:
            prepare_tokenizers(split.train, tok_dir, options)
        else:
            _copy_tokenizer(init, tok_dir)
    tokenizer = MarianTokenizer.from_pretrained(tok_dir)
    vocab = json.loads((tok_dir / "vocab.json").read_text())
    pad_id = vocab[PAD]
    print(f"vocabulary: {len(vocab)} shared pieces")
    train_examples = encode_pairs(split.train, tokenizer)
    dev_examples = encode_pairs(split.dev, tokenizer)

    config = marian_config(
        vocab,
        d_model=options.d_model,
        layers=options.layers,
        heads=options.heads,
        ffn_dim=options.ffn_dim,
        dropout=options.dropout,
    )
    model = MarianMTModel(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=options.peak_lr, betas=(0.9, 0.98))
    params = sum(p.numel() for p in model.parameters())
    print(f"model: {params / 1e6:.1f}M parameters")
    batches_per_epoch = math.ceil(len(train_examples) / options.batch_pairs)

    state_path = work / "state.pt"
    history_path = work / "history.json"
    history: dict[str, float] = {}
    epoch, step, first_step, done_in_epoch = 0, 0, 0, 0
    if state_path.exists():
        state = torch.load(state_path, weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        epoch, step, first_step = state["epoch"], state["step"], state["first_step"]
        done_in_epoch = state["batch"]
        torch.set_rng_state(state["torch_rng"])
        history = json.loads(history_path.read_text())
        print(f"resumed in epoch {epoch + 1} after step {step}")
    elif init is not None:
        _load_initial(model, init)
        epoch = options.init_epochs
        step = first_step = epoch * batches_per_epoch
        history[str(step)] = dev_loss(model, dev_examples, pad_id)
        torch.save(model.state_dict(), work / f"step-{step}.pt")
        print(f"initial dev loss {history[str(step)]:.3f}")

    def rate(at: int) -> float:
        rewarm = min(1.0, (at - first_step) / options.rewarm_steps) if first_step else 1.0
        return learning_rate(at, options) * rewarm

    def snapshot(batch: int) -> None:
        history[str(step)] = dev_loss(model, dev_examples, pad_id)
        print(f"step {step} (epoch {epoch + 1}): dev loss {history[str(step)]:.3f}", flush=True)
        torch.save(model.state_dict(), work / f"step-{step}.pt")
        state = {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "epoch": epoch,
            "step": step,
            "first_step": first_step,
            "batch": batch,
            "torch_rng": torch.get_rng_state(),
        }
        torch.save(state, work / "state.tmp")
        (work / "state.tmp").replace(state_path)
        history_path.write_text(json.dumps(history, indent=1))

    model.train()
    while epoch < options.epochs and step < options.max_steps and not stalled(history, options.patience):
        batches = make_batches(train_examples, options.batch_pairs, random.Random(SEED + epoch))
        started, seen_tokens, running = time.monotonic(), 0, 0.0
        for number, indices in enumerate(batches, 1):
            if number <= done_in_epoch:
                continue
            input_ids, mask, decoder_input_ids, labels = collate(train_examples, indices, pad_id)
            step += 1
            for group in optimizer.param_groups:
                group["lr"] = rate(step)
            logits = model(
                input_ids=input_ids, attention_mask=mask, decoder_input_ids=decoder_input_ids
            ).logits
            loss = F.cross_entropy(
                logits.flatten(0, 1),
                labels.flatten(),
                ignore_index=-100,
                label_smoothing=options.label_smoothing,
            )
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            running = 0.98 * running + 0.02 * loss.item() if running else loss.item()
            seen_tokens += int(mask.sum()) + int((labels != -100).sum())
            if number % 50 == 0:
                speed = seen_tokens / (time.monotonic() - started)
                print(
                    f"epoch {epoch + 1}/{options.epochs} batch {number}/{len(batches)} "
                    f"loss {running:.3f} lr {rate(step):.2e} {speed:.0f} tok/s",
                    flush=True,
                )
            if number == len(batches):
                epoch, number = epoch + 1, 0
            if number % options.snapshot_steps == 0:
                snapshot(number)
                if stalled(history, options.patience) or step >= options.max_steps:
                    break
        done_in_epoch = 0

    model.load_state_dict(_select(model, work, history, dev_examples, pad_id, options))
    save_checkpoint(model, tok_dir, out)
    print(f"checkpoint written to {out}")


def stalled(history: dict[str, float], patience: int) -> bool:
    """Whether the best dev loss is `patience` or more snapshots old."""
    steps = sorted(history, key=int)
    return bool(steps) and len(steps) - 1 - steps.index(min(steps, key=history.get)) >= patience


def _select(model, work: Path, history: dict[str, float], dev_examples, pad_id: int, options):
    """The weights with the lowest dev loss: the best snapshot or the average of any
    `options.average_last` consecutive snapshots (all of them if there are fewer)."""
    steps = sorted(history, key=int)
    best = min(steps, key=history.get)
    candidates = {f"step {best}": torch.load(work / f"step-{best}.pt")}
    size = min(options.average_last, len(steps))
    for first in range(len(steps) - size + 1 if size > 1 else 0):
        window = steps[first : first + size]
        paths = [work / f"step-{step}.pt" for step in window]
        candidates[f"average of steps {window[0]}..{window[-1]}"] = average_weights(paths)
    losses = {}
    for name, weights in candidates.items():
        model.load_state_dict(weights)
        losses[name] = dev_loss(model, dev_examples, pad_id)
        print(f"{name}: dev loss {losses[name]:.3f}")
    chosen = min(losses, key=losses.get)
    print(f"keeping {chosen}")
    return candidates[chosen]


TOKENIZER_FILES = (
    "source.spm",
    "target.spm",
    "vocab.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)


def _copy_tokenizer(source: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        (out / name).write_bytes((source / name).read_bytes())


def save_checkpoint(model, tok_dir: Path, out: Path) -> None:
    """Save the trained model in fp16 (half the size in git) with its tokenizer files."""
    out.mkdir(parents=True, exist_ok=True)
    model.eval()
    vocab = json.loads((tok_dir / "vocab.json").read_text())
    model.generation_config = marian_generation_config(vocab)
    model.half().save_pretrained(out)
    model.float()
    _copy_tokenizer(tok_dir, out)
    (out / "ATTRIBUTION.md").write_text(ATTRIBUTION)


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--epochs", type=int, default=TrainOptions.epochs)
    parser.add_argument(
        "--init",
        type=Path,
        help="Continue from this checkpoint's weights (as after --init-epochs epochs).",
    )
    parser.add_argument("--init-epochs", type=int, default=TrainOptions.init_epochs)
    parser.add_argument("--peak-lr", type=float, default=TrainOptions.peak_lr)
    parser.add_argument("--dropout", type=float, default=TrainOptions.dropout)
    parser.add_argument("--max-steps", type=int, default=TrainOptions.max_steps)
    args = parser.parse_args()
    torch.set_num_threads(2)
    options = TrainOptions(
        epochs=args.epochs,
        init_epochs=args.init_epochs,
        peak_lr=args.peak_lr,
        dropout=args.dropout,
        max_steps=args.max_steps,
    )
    train(args.corpus, args.work, args.out, options, args.init)


if __name__ == "__main__":
    main()
