"""transqueue's Translator against CTranslate2, side by side, on this machine.

    pip install -e '.[export,bench]'
    python bench/bench_ct2.py [--rounds 3] [--record bench/ct2_results.md]

Two models: the demo model (a real, trained checkpoint: realistic output lengths) and
"opus-sized", bench/opus_sized.py's stand-in for opus-mt-en-zh: a random model with its
exact shapes whose eos row and bias are fitted so that its (meaningless) outputs end
naturally after about 0.55 × source ids, as long as a real translation, so it measures
the decoder at full size on realistic lengths (on the dev sentences: 4–21 tokens, none at
the length cap, with PyTorch, both bundle precisions and CTranslate2 alike). Each is
exported with both int8 schemes (no validation) and converted to CTranslate2 int8;
everything built is cached, keyed by its parameters (the opus-sized checkpoint and bundles
under build/opus-sized/, shared with bench_memory.py; the rest under build/bench-ct2/), so
a rerun only measures.

Every variant translates the same English sentences (the demo model's held-out Tatoeba
pairs) in every round, variants interleaved, all on the machine's cores (CTranslate2: its
best settings for throughput, `inter_threads` = cores, one thread each; transqueue:
`threads` = cores).
The table gives target tokens per sentence, target tokens/s and the ratio to CTranslate2
int8 (median over rounds, with min–max), since random or int8 outputs differ in length
between engines.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import opus_sized  # noqa: E402
from build_cache import bundle, cached  # noqa: E402
from report import publish  # noqa: E402

from models.builder.quantize import QuantizeOptions  # noqa: E402
from models.demo.split import held_out  # noqa: E402
from models.demo.train import DEFAULT_CORPUS, DEFAULT_OUT, read_pairs  # noqa: E402
from models.threads import cpu_budget  # noqa: E402
from models.translator import BatchOptions, Translator  # noqa: E402

WORK = ROOT / "build" / "bench-ct2"


@dataclass(frozen=True)
class Model:
    name: str
    sentences: int
    checkpoint: Callable[[], Path]
    bundle: Callable[[QuantizeOptions], Path]
    parameters: dict


DEMO = {"checkpoint": str(DEFAULT_OUT)}
MODELS = {
    "demo": Model(
        "demo",
        400,
        lambda: DEFAULT_OUT,
        lambda quantize: bundle(WORK, "demo-bundle", DEFAULT_OUT, DEMO, quantize),
        DEMO,
    ),
    "opus-sized": Model("opus-sized", 400, opus_sized.checkpoint, opus_sized.bundle, opus_sized.parameters()),
}


def bundles(model: Model) -> dict[str, Path]:
    """The model's bundles per int8 scheme and its CTranslate2 int8 model."""
    import ctranslate2
    from ctranslate2.converters import TransformersConverter

    built = {scheme: model.bundle(QuantizeOptions(scheme=scheme)) for scheme in ("row", "tensor")}
    ct2 = cached(WORK, f"{model.name}-ct2", {**model.parameters, "ctranslate2": ctranslate2.__version__})
    if not (ct2 / "model.bin").exists():
        TransformersConverter(str(model.checkpoint())).convert(str(ct2), quantization="int8", force=True)
    built["ct2"] = ct2
    return built


def main() -> None:
    """Build what is missing, then measure every variant round by round."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--record", type=Path, help="append the table to this Markdown file")
    args = parser.parse_args()
    cores = cpu_budget()
    _, dev = held_out(read_pairs(DEFAULT_CORPUS))
    english = [en for en, _ in dev]
    lines = [
        f"{platform.processor() or platform.machine()}, {_cpu_name()}, {cores} cores; "
        f"{args.rounds} rounds; tokens/s = target tokens per second; ratio to CTranslate2 int8, "
        "median (min–max over rounds)",
        "",
        "| model | variant | sentences | tokens/sentence | tokens/s | ratio to CTranslate2 int8 |",
        "| --- | --- | ---: | ---: | ---: | --- |",
    ]
    for name in args.models:
        model = MODELS[name]
        paths = bundles(model)
        sentences = english[: model.sentences]
        variants = _variants(paths, cores)
        rates: dict[str, list[float]] = {variant: [] for variant in variants}
        tokens: dict[str, int] = {}
        for _ in range(args.rounds):
            for variant, run in variants.items():
                started = time.perf_counter()
                tokens[variant] = run(sentences)
                rates[variant].append(tokens[variant] / (time.perf_counter() - started))
        base = rates["CTranslate2 int8"]
        for variant, measured in rates.items():
            ratios = [rate / ref for rate, ref in zip(measured, base, strict=True)]
            lines.append(
                f"| {name} | {variant} | {len(sentences)} | {tokens[variant] / len(sentences):.1f} | "
                f"{statistics.median(measured):.0f} | "
                f"{statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f}) |"
            )
    publish("\n".join(lines), args.record)


def _cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def _variants(paths: dict[str, Path], cores: int) -> dict[str, Callable[[list[str]], int]]:
    import ctranslate2

    row = {
        precision: Translator(paths["row"], precision=precision, threads=cores)
        for precision in ("int8", "fp32")
    }
    codec, config = row["int8"].codec, row["int8"].config
    unbatched = Translator(paths["row"], threads=cores, batching=BatchOptions(max_batch=1))
    tensor = Translator(paths["tensor"], threads=cores)
    engine = ctranslate2.Translator(
        str(paths["ct2"]), device="cpu", compute_type="int8", inter_threads=cores, intra_threads=1
    )
    prefix = [config.target_lang_token] if codec.prefix_ids else []

    def ct2(sentences: list[str]) -> int:
        # one call, so CTranslate2 batches (and pads) as it likes; one length cap for all
        sources = [[*prefix, *codec.pieces(text), "</s>"] for text in sentences]
        results = engine.translate_batch(
            sources,
            beam_size=1,
            max_batch_size=32,
            batch_type="examples",
            max_decoding_length=row["int8"].max_new_tokens(max(map(len, sources))),
        )
        return sum(len(result.hypotheses[0]) for result in results)

    def ours(translator: Translator) -> Callable[[list[str]], int]:
        return lambda sentences: sum(r.target_tokens for r in translator.translate(sentences))

    return {
        "CTranslate2 int8": ct2,
        "transqueue int8, row scheme, batched (default)": ours(row["int8"]),
        "transqueue int8, row scheme, one row at a time": ours(unbatched),
        "transqueue int8, tensor scheme, one row at a time (before)": ours(tensor),
        "transqueue fp32, batched": ours(row["fp32"]),
    }


if __name__ == "__main__":
    main()
