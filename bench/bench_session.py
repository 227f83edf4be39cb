"""What each ONNX Runtime session setting costs or gains, measured side by side.

    python bench/bench_session.py --bundle build/demo-full [--sentences 150] [--record FILE]

Every variant translates the same sentences (the regression set, repeated) in one run,
interleaved round by round so that machine noise hits all variants alike. The report
gives sentences/s and the ratio to the default Translator settings on 2 cores (int8, two
sentences decoded side by side with one ORT thread each, graph optimisation "all", no
spinning). Run it on an idle machine: nothing else heavy beside it.
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

from report import publish

from models.builder.validate import regression_sentences
from models.threads import cpu_budget
from models.translator import SessionOptions, Translator

VARIANTS = {
    "default: 2 sentences x 1 thread, int8, all, no spin": dict(
        precision="int8", threads=2, session=SessionOptions()
    ),
    "fp32 decoder": dict(precision="fp32", threads=2, session=SessionOptions()),
    "1 sentence x 2 intra-op threads": dict(
        precision="int8", threads=1, session=SessionOptions(intra_op_threads=2)
    ),
    "1 sentence x 1 thread": dict(precision="int8", threads=1, session=SessionOptions()),
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
    parser.add_argument("--sentences", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--record", type=Path, help="append the Markdown table to this file")
    args = parser.parse_args()
    sentences = list(itertools.islice(itertools.cycle(regression_sentences()), args.sentences))
    translators = {name: Translator(args.bundle, **kw) for name, kw in VARIANTS.items()}
    seconds = dict.fromkeys(translators, 0.0)
    for _ in range(args.rounds):
        for name, translator in translators.items():
            started = time.perf_counter()
            for _ in translator.translate(sentences):
                pass
            seconds[name] += time.perf_counter() - started
    total = args.sentences * args.rounds
    base = total / seconds[next(iter(VARIANTS))]
    lines = [
        f"bundle {args.bundle}, {args.sentences} sentences x {args.rounds} rounds, "
        f"CPU budget {cpu_budget()} cores",
        "",
        "| variant | sentences/s | ratio to default |",
        "| --- | --- | --- |",
    ]
    for name, spent in seconds.items():
        rate = total / spent
        lines.append(f"| {name} | {rate:.1f} | {rate / base:.2f} |")
    publish("\n".join(lines), args.record)


if __name__ == "__main__":
    main()
