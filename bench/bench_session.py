"""What each Translator and ONNX Runtime session setting costs or gains, side by side.

    python bench/bench_session.py --bundle build/demo-full [--sentences 400] [--record FILE]

Every variant translates the same sentences (the demo model's held-out Tatoeba pairs) in one
run, interleaved round by round so that machine noise hits all variants alike, then
translates the first `--single` of them one at a time with `translate_one` (the latency
of a lone sentence). The report gives target tokens/s and the ratio to the default
Translator settings on 2 cores (int8, rows padded to a multiple of 8 and batched, two
batches decoded side by side with one ORT thread each, graph optimisation "all", no
spinning), and the mean milliseconds of a lone sentence. Run it on an idle machine:
nothing else heavy beside it.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from report import publish

from models.demo.split import held_out
from models.demo.train import DEFAULT_CORPUS, read_pairs
from models.threads import cpu_budget
from models.translator import BatchOptions, DecodeOptions, SessionOptions, Translator

VARIANTS = {
    "default: batched, 2 batches x 1 thread, int8, all, no spin": dict(
        precision="int8", threads=2, session=SessionOptions()
    ),
    "unbatched (max_batch 1)": dict(precision="int8", threads=2, batching=BatchOptions(max_batch=1)),
    "rows of one exact length (pad_to 1)": dict(precision="int8", threads=2, decode=DecodeOptions(pad_to=1)),
    "pad_to 16": dict(precision="int8", threads=2, decode=DecodeOptions(pad_to=16)),
    "max_batch 64, read-ahead 1024": dict(
        precision="int8", threads=2, batching=BatchOptions(max_batch=64, read_ahead=1024)
    ),
    "fp32 decoder": dict(precision="fp32", threads=2, session=SessionOptions()),
    "2 batches x 2 intra-op threads": dict(
        precision="int8", threads=2, session=SessionOptions(intra_op_threads=2)
    ),
    "1 batch x 2 intra-op threads": dict(
        precision="int8", threads=1, session=SessionOptions(intra_op_threads=2)
    ),
    "1 batch x 1 thread": dict(precision="int8", threads=1, session=SessionOptions()),
    "spinning on": dict(precision="int8", threads=2, session=SessionOptions(allow_spinning=True)),
    "optimisation basic": dict(
        precision="int8", threads=2, session=SessionOptions(graph_optimization="basic")
    ),
    "optimisation off": dict(
        precision="int8", threads=2, session=SessionOptions(graph_optimization="disable")
    ),
}


def main() -> None:
    """Run the variants and print (or record) the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, required=True, help="bundle with fp32 and int8")
    parser.add_argument("--sentences", type=int, default=400)
    parser.add_argument("--single", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--record", type=Path, help="append the Markdown table to this file")
    args = parser.parse_args()
    _, dev = held_out(read_pairs(DEFAULT_CORPUS))
    sentences = [english for english, _ in dev][: args.sentences]
    translators = {name: Translator(args.bundle, **kw) for name, kw in VARIANTS.items()}
    seconds = dict.fromkeys(translators, 0.0)
    tokens = dict.fromkeys(translators, 0)
    single = dict.fromkeys(translators, 0.0)
    for _ in range(args.rounds):
        for name, translator in translators.items():
            started = time.perf_counter()
            tokens[name] += sum(result.target_tokens for result in translator.translate(sentences))
            seconds[name] += time.perf_counter() - started
            started = time.perf_counter()
            for sentence in sentences[: args.single]:
                translator.translate_one(sentence)
            single[name] += time.perf_counter() - started
    base = tokens[next(iter(VARIANTS))] / seconds[next(iter(VARIANTS))]
    lines = [
        f"bundle {args.bundle}, {len(sentences)} sentences x {args.rounds} rounds, "
        f"CPU budget {cpu_budget()} cores",
        "",
        "| variant | tokens/s | ratio to default | lone sentence (ms) |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, spent in seconds.items():
        rate = tokens[name] / spent
        lone = single[name] / (args.single * args.rounds) * 1000
        lines.append(f"| {name} | {rate:.0f} | {rate / base:.2f} | {lone:.1f} |")
    publish("\n".join(lines), args.record)


if __name__ == "__main__":
    main()
