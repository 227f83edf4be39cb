"""Peak memory of `transqueue translate` on streamed, compressed record files of two sizes.

    python bench/bench_stream.py [--sizes-mb 4,16] [--formats jsonl.zst,csv.gz]
                                 [--record bench/stream_results.md]

Each input is --sizes-mb megabytes of records before compression (generated English
sentences, as in bench/bench_inputs.py: one to three a record), written once under --work.
Each measurement is a fresh Python process translating one file through the Python API
(plan_files -> read_tasks -> translate_files) with the stand-in model of bench_inputs.py;
its peak RSS (VmHWM) and wall time are reported. Streaming holds a few windows
(STREAM_WINDOW_BYTES) and the run's translation memory (TRANSLATION_MEMORY_ENTRIES), so the
peak must not grow with the size of the file. The pysbd helper process is not counted.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import tempfile
from pathlib import Path

import zstandard
from bench_inputs import ROOT, TRANSLATE, measure, sentence
from report import publish

PROBE = "from producer.documents import ReadOptions\n" + TRANSLATE.replace(
    "RunOptions()", "RunOptions(read=ReadOptions(fields=('text',), columns=('text',)))"
)


def write_records(path: Path, size: int) -> None:
    """`size` bytes (before compression) of JSONL or CSV records with a `text` of sentences."""
    rng = random.Random(0)
    table = ".csv" in path.suffixes
    opener = gzip.open if path.suffix == ".gz" else zstandard.open
    with opener(path, "wt", encoding="utf-8", newline="") as handle:
        written = handle.write("id,text,source\r\n" if table else "")
        n = 0
        while written < size:
            text = " ".join(sentence(rng) for _ in range(rng.randint(1, 3)))
            if table:  # the sentences hold no quotes
                line = f'{n},"{text}","generated, kept"\r\n'
            else:
                line = json.dumps({"id": n, "text": text, "source": "generated"}) + "\n"
            written += handle.write(line)
            n += 1


def main() -> None:
    """Write the inputs (once) and measure translate on each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", default="4,16")
    parser.add_argument("--formats", default="jsonl.zst,csv.gz")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "bench-stream")
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--record", type=Path)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    rows = [
        "| input | compressed MB | result | peak RSS (MB) | seconds |",
        "| --- | --- | --- | --- | --- |",
    ]
    for fmt in args.formats.split(","):
        for size in map(int, args.sizes_mb.split(",")):
            source = args.work / f"records-{size}mb.{fmt}"
            if not source.exists():
                write_records(source, size * 1_000_000)
            with tempfile.TemporaryDirectory(prefix="bench-stream-out-") as out:
                run = measure(PROBE, source, Path(out), ROOT, dict(os.environ), args.timeout)
            packed = source.stat().st_size / 1e6
            rows.append(
                f"| {source.name} | {packed:.1f} | {run['result']} (exit {run['status']}) "
                f"| {run['rss']:.0f} | {run['seconds']:.1f} |"
            )
            print(rows[-1], flush=True)
    publish("\n".join(rows), args.record, f"translate, streamed, sizes {args.sizes_mb} MB before compression")


if __name__ == "__main__":
    main()
