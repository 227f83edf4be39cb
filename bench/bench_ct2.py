"""transqueue's Translator against CTranslate2, side by side, on this machine.

    pip install -e '.[export,bench]'
    python bench/bench_ct2.py [--rounds 3] [--record bench/ct2_results.md]

Two models: the demo model (a real, trained checkpoint: realistic output lengths) and a
random model with opus-mt-en-zh's exact shapes (bench_memory.py builds it; its outputs
are meaningless and mostly run to the length cap, so it measures the decoder at full
size). Each is exported with both int8 schemes (no validation) and converted to
CTranslate2 int8; everything built is cached under build/bench-ct2/, keyed by its
parameters, so a rerun only measures.

Every variant translates the same English sentences (the demo model's held-out Tatoeba
pairs) in every round, variants interleaved, all on the machine's cores (CTranslate2: its
best settings for throughput, `inter_threads` = cores, one thread each; transqueue:
`threads` = cores).
The table gives target tokens/s and the ratio to CTranslate2 int8 (median over rounds,
with min–max), since random or int8 outputs differ in length between engines.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from bench_memory import OPUS_SHAPES, OPUS_VOCAB, build_checkpoint  # noqa: E402
from report import publish  # noqa: E402

from models.builder.quantize import QuantizeOptions  # noqa: E402
from models.demo.split import held_out  # noqa: E402
from models.demo.train import DEFAULT_CORPUS, DEFAULT_OUT, read_pairs  # noqa: E402
from models.threads import cpu_budget  # noqa: E402
from models.translator import BatchOptions, Translator  # noqa: E402

WORK = ROOT / "build" / "bench-ct2"
#: Bumped when the way bundles are built changes, so that cached bundles are remade.
BUNDLE_VERSION = 3


@dataclass(frozen=True)
class Model:
    name: str
    sentences: int
    make_checkpoint: Callable[[Path], Path]
    parameters: dict


def _demo(directory: Path) -> Path:
    return DEFAULT_OUT


def _opus_sized(directory: Path) -> Path:
    if not (directory / "model.safetensors").exists():
        build_checkpoint(directory)
    return directory


MODELS = {
    "demo": Model("demo", 400, _demo, {"checkpoint": str(DEFAULT_OUT)}),
    "opus-sized": Model("opus-sized", 48, _opus_sized, {**OPUS_SHAPES, "vocab": OPUS_VOCAB}),
}


def cached(kind: str, parameters: dict) -> Path:
    """build/bench-ct2/KIND-HASH, the hash over the parameters."""
    text = json.dumps(parameters, sort_keys=True)
    return WORK / f"{kind}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def bundles(model: Model) -> dict[str, Path]:
    """The model's checkpoint, its bundles per int8 scheme and its CTranslate2 int8 model."""
    import ctranslate2
    from ctranslate2.converters import TransformersConverter

    from models.builder.export import ExportOptions, export

    checkpoint = model.make_checkpoint(cached(f"{model.name}-checkpoint", model.parameters))
    built = {}
    for scheme in ("row", "tensor"):
        options = ExportOptions(validate=False, quantize=QuantizeOptions(scheme=scheme))
        key = {**model.parameters, **options.quantize.as_dict(), "version": BUNDLE_VERSION}
        path = cached(f"{model.name}-bundle", key)
        if not (path / "bundle.json").exists():
            export(str(checkpoint), path, options)
        built[scheme] = path
    ct2 = cached(f"{model.name}-ct2", {**model.parameters, "ctranslate2": ctranslate2.__version__})
    if not (ct2 / "model.bin").exists():
        TransformersConverter(str(checkpoint)).convert(str(ct2), quantization="int8", force=True)
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
        "| model | variant | sentences | tokens/s | ratio to CTranslate2 int8 |",
        "| --- | --- | ---: | ---: | --- |",
    ]
    for name in args.models:
        model = MODELS[name]
        paths = bundles(model)
        sentences = english[: model.sentences]
        variants = _variants(paths, cores)
        rates: dict[str, list[float]] = {variant: [] for variant in variants}
        for _ in range(args.rounds):
            for variant, run in variants.items():
                started = time.perf_counter()
                tokens = run(sentences)
                rates[variant].append(tokens / (time.perf_counter() - started))
        base = rates["CTranslate2 int8"]
        for variant, measured in rates.items():
            ratios = [rate / ref for rate, ref in zip(measured, base, strict=True)]
            lines.append(
                f"| {name} | {variant} | {len(sentences)} | {statistics.median(measured):.0f} | "
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
