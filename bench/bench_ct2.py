"""transqueue's Translator against CTranslate2, side by side, on this machine.

    pip install -e '.[export,bench]'
    python bench/bench_ct2.py [--rounds 3] [--record bench/results/ct2.md]

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
pairs) in every round, variants interleaved in an order rotated each round, all on the
machine's cores (CTranslate2: its best settings for throughput, `inter_threads` = cores,
one thread each, in batches of 32 and of one; transqueue: `threads` = cores, int8 batched,
int8 one row at a time and fp32; PyTorch fp32: `model.generate` on length-sorted batches of
16, torch on all cores: bench/torch_greedy.py).
The table gives target tokens per sentence, target tokens/s and the ratio to CTranslate2
int8 (median over rounds, with min–max), since random or int8 outputs differ in length
between engines.

Two more tables per model: W1, single-sentence latency (the `--single` regression sentences
with the most source ids, each translated alone; median milliseconds per round, ratio to
CTranslate2 int8 on all cores); and W3, each engine in a fresh process: seconds from
process start (imports included; the engine's model files read once before, so that they
are in the page cache) until it has translated one sentence, RSS then, and peak
RSS after the bulk run above (VmHWM), once per round for every engine (median, min–max).
W2 is the bulk table. W4: a whole `transqueue worker` (solo, the default) on a real Redis,
with the int8 bundle (the opus-sized one's source tokenizer padded to an opus-mt
source.spm's 32,000 pieces, for its load time), translating a job of `W4_SENTENCES`
sentences once per round: ready time, sentences/s and the whole worker's peak RSS
(bench/bench_pool.py's measurement, which compares pools and sizes besides).
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

import bench_pool  # noqa: E402
import opus_sized  # noqa: E402
import torch_greedy  # noqa: E402
from build_cache import bundle, cached, compile_package, padded_source, page_in  # noqa: E402
from report import publish  # noqa: E402

from models.builder.quantize import QuantizeOptions  # noqa: E402
from models.builder.validate import regression_sentences  # noqa: E402
from models.demo.split import held_out  # noqa: E402
from models.demo.train import DEFAULT_CORPUS, DEFAULT_OUT, read_pairs  # noqa: E402
from models.threads import cpu_budget  # noqa: E402
from models.translator import BatchOptions, SessionOptions, Translator  # noqa: E402

WORK = ROOT / "build" / "bench-ct2"
#: W4: the sentences of the whole worker's job (bench_pool.py's corpus), and its case: the
#: defaults a deployed worker runs (pool, chunk size, max batch).
W4_SENTENCES = 300
W4_CASE = ("solo-1x2", bench_pool.CHUNK_SIZE, bench_pool.MAX_BATCH)


@dataclass(frozen=True)
class Model:
    name: str
    sentences: int
    checkpoint: Callable[[], Path]
    bundle: Callable[[QuantizeOptions], Path]
    parameters: dict
    source_pieces: int = 0  # W4: the source tokenizer padded to this many pieces (0: as it is)


DEMO = {"checkpoint": str(DEFAULT_OUT)}
MODELS = {
    "demo": Model(
        "demo",
        400,
        lambda: DEFAULT_OUT,
        lambda quantize: bundle(WORK, "demo-bundle", DEFAULT_OUT, DEMO, quantize),
        DEMO,
    ),
    "opus-sized": Model(
        "opus-sized", 400, opus_sized.checkpoint, opus_sized.bundle, opus_sized.parameters(), 32_000
    ),
}


def bundles(model: Model) -> dict[str, Path]:
    """The model's bundles per int8 scheme, its CTranslate2 int8 model and its checkpoint."""
    import ctranslate2
    from ctranslate2.converters import TransformersConverter

    built = {scheme: model.bundle(QuantizeOptions(scheme=scheme)) for scheme in ("row", "tensor")}
    ct2 = cached(WORK, f"{model.name}-ct2", {**model.parameters, "ctranslate2": ctranslate2.__version__})
    if not (ct2 / "model.bin").exists():
        TransformersConverter(str(model.checkpoint())).convert(str(ct2), quantization="int8", force=True)
    built["ct2"] = ct2
    built["checkpoint"] = model.checkpoint()
    return built


def main() -> None:
    """Build what is missing, then measure every variant round by round."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--single", type=int, default=20, help="sentences of the latency test")
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
    latency = [
        "W1, one sentence at a time: median ms per sentence, ratio to CTranslate2 int8 "
        "(median, min–max over rounds)",
        "",
        "| model | variant | source ids (min–max) | ms | ratio to CTranslate2 int8 |",
        "| --- | --- | --- | ---: | --- |",
    ]
    cold = [
        "W3, each engine in a fresh process (all cores; PyTorch fp32, the others int8): ready = "
        "imports, load and one sentence translated; peak after the bulk run; median (min–max) "
        "over rounds, the engines' order rotated",
        "",
        "| model | engine | ready (s) | RSS when ready (MB) | peak RSS (MB) |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    pool, chunk, batch = W4_CASE
    worker = [
        f"W4, a whole `transqueue worker` ({pool}, chunks of {chunk}, batches of at most {batch}) "
        f"on a real Redis, a job of {W4_SENTENCES} sentences, once per round: median (min–max)",
        "",
        "| model | source pieces | ready (s) | sentences/s | peak RSS, whole worker (MB) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name in args.models:
        model = MODELS[name]
        paths = bundles(model)
        sentences = english[: model.sentences]
        latency += _latency(name, paths, cores, args.rounds, args.single)
        cold += _cold_rows(name, paths, sentences, args.rounds)
        variants = _variants(paths, cores)
        rates: dict[str, list[float]] = {variant: [] for variant in variants}
        tokens: dict[str, int] = {}
        for number in range(args.rounds):
            for variant, run in _rotated(variants, number):
                started = time.perf_counter()
                tokens[variant] = run(sentences)
                rates[variant].append(tokens[variant] / (time.perf_counter() - started))
        base = rates["CTranslate2 int8"]
        for variant, measured in rates.items():
            ratios = [rate / ref for rate, ref in zip(measured, base, strict=True)]
            lines.append(
                f"| {name} | {variant} | {len(sentences)} | {tokens[variant] / len(sentences):.1f} | "
                f"{statistics.median(measured):.0f} | {_spread(ratios, 2)} |"
            )
        worker.append(_worker_row(model, paths["row"], args.rounds))
    publish("\n".join([*lines, "", *latency, "", *cold, "", *worker]), args.record)


def _worker_row(model: Model, row_bundle: Path, rounds: int) -> str:
    """W4's row: `transqueue worker` with the model's int8 bundle (`Model.source_pieces`)."""
    served = padded_source(row_bundle, model.source_pieces) if model.source_pieces else row_bundle
    sentences = bench_pool.read_sentences(bench_pool.DEFAULT_CORPUS, W4_SENTENCES)
    results = bench_pool.measure_rounds([W4_CASE], str(served), sentences, rounds)
    pieces = model.source_pieces or "as exported"
    return (
        f"| {model.name} | {pieces} | {_spread([r.ready_seconds for r in results], 2)} | "
        f"{_spread([r.rate for r in results], 0)} | {_spread([r.peak_total_mb for r in results], 0)} |"
    )


def _latency(name: str, paths: dict[str, Path], cores: int, rounds: int, count: int) -> list[str]:
    """W1 rows: each of the `count` longest regression sentences translated alone."""
    import ctranslate2

    ours = Translator(paths["row"], threads=cores)
    wide = Translator(  # as `transqueue translate -` builds it
        paths["row"], threads=1, session=SessionOptions(intra_op_threads=cores, allow_spinning=True)
    )
    engine = ctranslate2.Translator(
        str(paths["ct2"]), device="cpu", compute_type="int8", inter_threads=1, intra_threads=cores
    )
    codec = ours.codec
    prefix = [ours.config.target_lang_token] if codec.prefix_ids else []
    sentences = sorted(regression_sentences(), key=lambda text: len(codec.pieces(text)))[-count:]

    def ct2(text: str) -> None:
        source = [*prefix, *codec.pieces(text), "</s>"]
        engine.translate_batch([source], beam_size=1, max_decoding_length=ours.max_new_tokens(len(source)))

    torch_model = torch_greedy.load(paths["checkpoint"], cores)

    def pytorch(text: str) -> None:
        torch_greedy.generate(torch_model, [codec.encode(text).tolist()], ours.max_new_tokens)

    variants: dict[str, Callable[[str], object]] = {
        "CTranslate2 int8, intra_threads = cores": ct2,
        "transqueue int8, `translate_one` (default: 1 ORT thread)": ours.translate_one,
        "transqueue int8, `translate_one` as `translate -` (all cores, decoder spinning)": wide.translate_one,
        "PyTorch fp32, `generate`, torch threads = cores": pytorch,
    }
    medians: dict[str, list[float]] = {variant: [] for variant in variants}
    for number in range(rounds):
        for variant, translate in _rotated(variants, number):
            times = []
            for text in sentences:
                started = time.perf_counter()
                translate(text)
                times.append((time.perf_counter() - started) * 1000)
            medians[variant].append(statistics.median(times))
    lengths = [len(codec.encode(text)) for text in sentences]
    base = medians["CTranslate2 int8, intra_threads = cores"]
    rows = []
    for variant, measured in medians.items():
        ratios = [ms / ref for ms, ref in zip(measured, base, strict=True)]
        rows.append(
            f"| {name} | {variant} | {min(lengths)}–{max(lengths)} | {statistics.median(measured):.0f} | "
            f"{_spread(ratios, 2)} |"
        )
    return rows


#: W3 probes, run in a fresh process each: argv = model path, the sentences file (text for
#: transqueue, source pieces for CTranslate2, source ids for PyTorch) and, for PyTorch only,
#: the length cap.
ENGINES = {
    "transqueue int8 (batched, default)": """
import time
started = time.perf_counter()
import sys
from models.translator import Translator
from models.threads import cpu_budget
engine = Translator(sys.argv[1], threads=cpu_budget())
sentences = open(sys.argv[2], encoding="utf-8").read().splitlines()
engine.translate_one(sentences[0])
def bulk():
    return sum(r.target_tokens for r in engine.translate(sentences))
""",
    "CTranslate2 int8 (translate_batch, max_batch_size 32)": """
import time
started = time.perf_counter()
import sys
import ctranslate2
from models.threads import cpu_budget
cores = cpu_budget()
engine = ctranslate2.Translator(
    sys.argv[1], device="cpu", compute_type="int8", inter_threads=cores, intra_threads=1
)
sources = [line.split(" ") for line in open(sys.argv[2], encoding="utf-8").read().splitlines()]
engine.translate_batch(sources[:1], beam_size=1)
def bulk():
    results = engine.translate_batch(sources, beam_size=1, max_batch_size=32)
    return sum(len(result.hypotheses[0]) for result in results)
""",
    f"PyTorch fp32 (`generate` in batches of {torch_greedy.BATCH})": """
import time
started = time.perf_counter()
import sys
sys.path.insert(0, "bench")
import torch_greedy
from models.threads import cpu_budget
model = torch_greedy.load(sys.argv[1], cpu_budget())
rows = [[int(i) for i in line.split()] for line in open(sys.argv[2], encoding="utf-8").read().splitlines()]
cap = int(sys.argv[3])
torch_greedy.generate(model, rows[:1], lambda width: cap)
def bulk():
    return torch_greedy.generate(model, rows, lambda width: cap)
""",
}

#: Appended to each W3 probe: report ready time, RSS when ready and peak after bulk().
REPORT = """
import json, re
ready = time.perf_counter() - started
def megabytes(field):
    return int(re.search(field + r":\\s+(\\d+)", open("/proc/self/status").read())[1]) / 1024
ready_rss = megabytes("VmRSS")
bulk()
print(json.dumps({"ready_s": ready, "ready_rss_mb": ready_rss, "peak_rss_mb": megabytes("VmHWM")}))
"""


def _cold_rows(name: str, paths: dict[str, Path], sentences: list[str], rounds: int) -> list[str]:
    """W3 rows: every engine's probe `rounds` times, in rotated order (one fresh process
    is one sample of the machine's moment: a run had one at 3.7x the others)."""
    probes = {engine: _probe_inputs(engine, paths, sentences) for engine in ENGINES}
    found: dict[str, list[dict]] = {engine: [] for engine in ENGINES}
    for number in range(rounds):
        for engine, inputs in _rotated(probes, number):
            found[engine].append(_cold_start(engine, *inputs))

    def spread(samples: list[dict], key: str, digits: int) -> str:
        return _spread([sample[key] for sample in samples], digits)

    return [
        f"| {name} | {engine} | {spread(samples, 'ready_s', 2)} | {spread(samples, 'ready_rss_mb', 0)} | "
        f"{spread(samples, 'peak_rss_mb', 0)} |"
        for engine, samples in found.items()
    ]


def _probe_inputs(
    engine: str, paths: dict[str, Path], sentences: list[str]
) -> tuple[Path, list[str], list[str]]:
    """`engine`'s W3 probe arguments: (model path, the lines of its sentences file, extra
    argv). CTranslate2 gets the sentences as source pieces and PyTorch as source ids,
    tokenized here as in the bulk table, PyTorch also the Translator's length cap for the
    longest sentence (the others apply their own)."""
    if engine.startswith("transqueue"):
        return paths["row"], sentences, []
    translator = Translator(paths["row"], warmup=False, verify=False)
    codec, token = translator.codec, translator.config.target_lang_token
    if engine.startswith("PyTorch"):
        rows = [codec.encode(text) for text in sentences]
        cap = translator.max_new_tokens(max(map(len, rows)))
        return paths["checkpoint"], [" ".join(map(str, row)) for row in rows], [str(cap)]
    prefix = [token] if codec.prefix_ids else []
    return paths["ct2"], [" ".join([*prefix, *codec.pieces(text), "</s>"]) for text in sentences], []


def _cold_start(engine: str, model: Path, lines: list[str], extra: list[str]) -> dict:
    """One W3 sample: `engine`'s probe in a fresh process on `model` (its files read into
    the page cache first), with `lines` as its sentences file and `extra` argv (VmHWM:
    ru_maxrss would carry this process's peak across exec)."""
    import json
    import subprocess
    import tempfile

    page_in(model)
    compile_package()
    with tempfile.NamedTemporaryFile("w", suffix=".txt", encoding="utf-8") as listing:
        listing.write("\n".join(lines))
        listing.flush()
        done = subprocess.run(
            [sys.executable, "-c", ENGINES[engine] + REPORT, str(model), listing.name, *extra],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _spread(values: list[float], digits: int) -> str:
    """The median of `values` and their min–max, with `digits` decimals: "0.97 (0.89–1.12)"."""
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def _rotated(variants: dict, number: int) -> list:
    """The (name, callable) pairs of `variants` in the order of round `number`: rotated by
    one a round, so that no variant always runs first or after the same one (a fixed order
    favoured one position by up to 5% on this machine)."""
    pairs = list(variants.items())
    start = number % len(pairs)
    return pairs[start:] + pairs[:start]


#: CPU flags that decide which int8 GEMM kernels ONNX Runtime and CTranslate2 pick.
INT8_FLAGS = ("avx2", "avx512bw", "avx512_vnni", "avx_vnni", "amx_int8")


def _cpu_name() -> str:
    """The CPU's model name and its int8-relevant instruction sets (`INT8_FLAGS`)."""
    info = Path("/proc/cpuinfo").read_text().splitlines()
    name = next(
        (line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "unknown CPU"
    )
    flags = next((line.split(":", 1)[1].split() for line in info if line.startswith("flags")), [])
    return f"{name} ({' '.join(flag for flag in INT8_FLAGS if flag in flags) or 'no AVX2'})"


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

    def ct2(batch: int) -> Callable[[list[str]], int]:
        # one call, so CTranslate2 batches (and pads) as it likes, `inter_threads` batches
        # side by side; one length cap for all
        def run(sentences: list[str]) -> int:
            sources = [[*prefix, *codec.pieces(text), "</s>"] for text in sentences]
            results = engine.translate_batch(
                sources,
                beam_size=1,
                max_batch_size=batch,
                batch_type="examples",
                max_decoding_length=row["int8"].max_new_tokens(max(map(len, sources))),
            )
            return sum(len(result.hypotheses[0]) for result in results)

        return run

    def ours(translator: Translator) -> Callable[[list[str]], int]:
        return lambda sentences: sum(r.target_tokens for r in translator.translate(sentences))

    def pytorch(sentences: list[str]) -> int:
        rows = [codec.encode(text).tolist() for text in sentences]
        return torch_greedy.generate(torch_model, rows, row["int8"].max_new_tokens)

    torch_model = torch_greedy.load(paths["checkpoint"], cores)
    return {
        "CTranslate2 int8": ct2(32),
        "CTranslate2 int8, batches of one": ct2(1),
        "transqueue int8, row scheme, batched (default)": ours(row["int8"]),
        "transqueue int8, row scheme, one row at a time": ours(unbatched),
        "transqueue int8, tensor scheme, one row at a time (before)": ours(tensor),
        "transqueue fp32, batched": ours(row["fp32"]),
        f"PyTorch fp32, `generate` in batches of {torch_greedy.BATCH}": pytorch,
    }


if __name__ == "__main__":
    main()
