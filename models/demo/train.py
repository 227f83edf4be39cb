"""Train the demo en→zh Marian model from the Tatoeba corpus in ../shared/data/en-zh.

    python -m models.demo.train [--corpus PATH] [--work build/train-demo] [--out DIR]

Reproducible (fixed seeds, single-threaded SentencePiece, deterministic batching) and
resumable: the state is saved after every epoch in --work, and a rerun continues from
it. The result is a genuine MarianMTModel checkpoint in the opus-mt directory layout
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

DEFAULT_CORPUS = defaults.TATOEBA_CORPUS
DEFAULT_WORK = Path("build/train-demo")
DEFAULT_OUT = Path(__file__).resolve().parent / "checkpoint"
SEED = 20261130

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
    dev_pairs: int = 1000


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


def split_dev(
    pairs: list[tuple[str, str]], dev_pairs: int
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Hold out about `dev_pairs` pairs whose English sentences never occur in training."""
    english = sorted({en for en, _ in pairs})
    random.Random(SEED).shuffle(english)
    by_english: dict[str, list[tuple[str, str]]] = {}
    for pair in pairs:
        by_english.setdefault(pair[0], []).append(pair)
    dev: list[tuple[str, str]] = []
    held: set[str] = set()
    for sentence in english:
        if len(dev) >= dev_pairs:
            break
        dev.extend(by_english[sentence])
        held.add(sentence)
    train = [pair for pair in pairs if pair[0] not in held]
    return train, dev


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


def dev_loss(model, examples, pad_id: int, options: TrainOptions) -> float:
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


def train(corpus: Path, work: Path, out: Path, options: TrainOptions) -> None:
    """Run (or resume) the whole training and write the checkpoint to `out`."""
    from transformers import MarianMTModel, MarianTokenizer

    torch.manual_seed(SEED)
    work.mkdir(parents=True, exist_ok=True)
    train_pairs, dev_pairs = split_dev(read_pairs(corpus), options.dev_pairs)
    print(f"corpus {corpus}: {len(train_pairs)} train pairs, {len(dev_pairs)} dev pairs")
    (work / "dev.tsv").write_text("".join(f"{en}\t{zh}\n" for en, zh in dev_pairs), "utf-8")

    tok_dir = work / "tokenizer"
    if not (tok_dir / "vocab.json").exists():
        prepare_tokenizers(train_pairs, tok_dir, options)
    tokenizer = MarianTokenizer.from_pretrained(tok_dir)
    vocab = json.loads((tok_dir / "vocab.json").read_text())
    pad_id = vocab[PAD]
    print(f"vocabulary: {len(vocab)} shared pieces")
    train_examples = encode_pairs(train_pairs, tokenizer)
    dev_examples = encode_pairs(dev_pairs, tokenizer)

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

    state_path = work / "state.pt"
    epoch, step = 0, 0
    if state_path.exists():
        state = torch.load(state_path, weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        epoch, step = state["epoch"], state["step"]
        torch.set_rng_state(state["torch_rng"])
        print(f"resumed after epoch {epoch} (step {step})")

    model.train()
    while epoch < options.epochs:
        rng = random.Random(SEED + epoch)
        batches = make_batches(train_examples, options.batch_pairs, rng)
        started, seen_tokens, running = time.monotonic(), 0, 0.0
        for number, indices in enumerate(batches, 1):
            input_ids, mask, decoder_input_ids, labels = collate(train_examples, indices, pad_id)
            step += 1
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(step, options)
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
            if number % 100 == 0:
                rate = seen_tokens / (time.monotonic() - started)
                print(
                    f"epoch {epoch + 1}/{options.epochs} batch {number}/{len(batches)} "
                    f"loss {running:.3f} lr {learning_rate(step, options):.2e} {rate:.0f} tok/s",
                    flush=True,
                )
        epoch += 1
        loss_dev = dev_loss(model, dev_examples, pad_id, options)
        print(
            f"epoch {epoch} done in {time.monotonic() - started:.0f}s, dev loss {loss_dev:.3f}",
            flush=True,
        )
        state = {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "epoch": epoch,
            "step": step,
            "torch_rng": torch.get_rng_state(),
        }
        torch.save(state, work / "state.tmp")
        (work / "state.tmp").replace(state_path)

    save_checkpoint(model, tok_dir, out)
    print(f"checkpoint written to {out}")


def save_checkpoint(model, tok_dir: Path, out: Path) -> None:
    """Save the trained model in fp16 (half the size in git) with its tokenizer files."""
    out.mkdir(parents=True, exist_ok=True)
    model.eval()
    vocab = json.loads((tok_dir / "vocab.json").read_text())
    model.generation_config = marian_generation_config(vocab)
    model.half().save_pretrained(out)
    model.float()
    for name in (
        "source.spm",
        "target.spm",
        "vocab.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
    ):
        (out / name).write_bytes((tok_dir / name).read_bytes())
    (out / "ATTRIBUTION.md").write_text(ATTRIBUTION)


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--epochs", type=int, default=TrainOptions.epochs)
    args = parser.parse_args()
    torch.set_num_threads(2)
    train(args.corpus, args.work, args.out, TrainOptions(epochs=args.epochs))


if __name__ == "__main__":
    main()
