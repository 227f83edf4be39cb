"""Resident memory of a Translator with a bundle the size of opus-mt-en-zh.

    python bench/bench_memory.py [--work build/opus-sized] [--record FILE]

The real opus-mt-en-zh cannot be downloaded here, so this uses the stand-in of
bench/opus_sized.py: a random MarianMTModel with its exact shapes (vocab 65001, d_model 512,
6+6 layers, 8 heads, FFN 2048, tied embeddings) whose eos row and bias are fitted so that
outputs end naturally after about 0.55 × source ids (the 56 regression sentences: 5–58
tokens, none at the length cap), exported without validation (fp32 + int8; both cached under
--work, keyed by their parameters). Then, in fresh processes, it loads a Translator (ready:
imports, sessions, hash check, warm-up; the bundle's files read once before, so that they
are in the page cache) and translates the 56 regression sentences,
reporting the ready seconds, the RSS when ready and the peak RSS for each precision and
batch size. A worker process must stay under 512 MB.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import build_cache  # noqa: E402
import opus_sized  # noqa: E402
from report import publish  # noqa: E402

from models.builder.export import size_report  # noqa: E402

# VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, so a child of this (torch-
# holding) process would report the parent's peak.
PROBE = """
import time
started = time.perf_counter()
import json, re, sys
from models.translator import BatchOptions, Translator
t = Translator(sys.argv[1], precision=sys.argv[2], threads=2, batching=BatchOptions(int(sys.argv[3])))
ready = time.perf_counter() - started
def megabytes(field):
    return int(re.search(field + r":\\s+(\\d+)", open("/proc/self/status").read())[1]) / 1024
ready_rss = megabytes("VmRSS")
from models.builder.validate import regression_sentences
for r in t.translate(regression_sentences()):
    pass
print(json.dumps({"peak_rss_mb": megabytes("VmHWM"), "ready_rss_mb": ready_rss, "ready_s": ready}))
"""
#: (precision, max_batch) pairs measured.
CASES = (("int8", 32), ("int8", 8), ("int8", 1), ("fp32", 32))


def main() -> None:
    """Build (once), export (once) and measure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=opus_sized.WORK)
    parser.add_argument("--record", type=Path)
    parser.add_argument(
        "--source-pieces",
        type=int,
        default=0,
        help="pad the source tokenizer to this many pieces (build_cache.padded_source): an "
        "opus-mt source.spm's size, for its load time",
    )
    args = parser.parse_args()
    bundle = opus_sized.bundle(work=args.work)
    if args.source_pieces:
        bundle = build_cache.padded_source(bundle, args.source_pieces)
    print(size_report(bundle, json.loads((bundle / "bundle.json").read_text())))
    lines = [
        "| decoder | max_batch | ready from process start (s) | RSS when ready (MB) "
        "| peak RSS of one Translator process, 2 threads (MB) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for precision, max_batch in CASES:
        build_cache.page_in(bundle)
        build_cache.compile_package()
        out = subprocess.run(
            [sys.executable, "-c", PROBE, str(bundle), precision, str(max_batch)],
            check=True,
            capture_output=True,
            text=True,
            cwd=ROOT,
        ).stdout
        measured = json.loads(out.splitlines()[-1])
        lines.append(
            f"| {precision} | {max_batch} | {measured['ready_s']:.2f} | {measured['ready_rss_mb']:.0f} "
            f"| {measured['peak_rss_mb']:.0f} |"
        )
    publish("\n".join(lines), args.record)


if __name__ == "__main__":
    main()
