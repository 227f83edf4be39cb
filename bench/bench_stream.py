"""Peak memory of `transqueue translate` on streamed, compressed record files, up to 1 GB.

    python bench/bench_stream.py [--sizes-mb 4,16] [--formats jsonl.zst,csv.gz]
                                 [--payload-kb 0] [--packed] [--model stand-in|demo]
                                 [--work DIR] [--record bench/results/stream.md]

Each input is --sizes-mb megabytes of records (before compression, or with --packed after
it), written once under --work. A record has an `id`, a `text` of one to three English
sentences (each two Tatoeba sentences joined into one, bench_pool.joined_sentences, so that
they are distinct), a `source` and, with --payload-kb K, a `blob`: base64 of K KiB of random
bytes, which hardly compresses, so that a corpus of 1 GB compressed holds a text that can
be translated in minutes while every byte of it still goes through the streamed reader,
parser, renderer and writer, which must copy the blob byte for byte.

Each measurement is a fresh Python process translating one file: with the stand-in model
of bench_inputs.py (answers each sentence at once with Chinese-sized text) through the
Python API (plan_files -> read_tasks -> translate_files), or with --model demo through the
real command (`transqueue translate FILE -o DIR --field/--column text`, the bundled demo
model, default threads). Its peak RSS (VmHWM), its RSS over the run (the highest in each
quarter of the run's time, sampled every 50 ms), the peak of its pysbd helper process and
the wall time are reported. Streaming holds a few windows (STREAM_WINDOW_BYTES) and the
run's translation memory (TRANSLATION_MEMORY_ENTRIES), so the peak must not grow with the
size of the file. The output is then read back, decompressed, line by line beside the
input: the same number of lines, every byte outside the `text` values identical, and every
`text` value translated (holding CJK characters).
"""

from __future__ import annotations

import argparse
import base64
import gzip
import io
import json
import os
import random
import re
import tempfile
from collections.abc import Iterator
from itertools import islice, zip_longest
from pathlib import Path

import zstandard
from bench_inputs import ROOT, TRANSLATE, measure
from bench_pool import joined_sentences, read_sentences
from report import publish

from models.builder.defaults import TATOEBA_CORPUS
from producer.compression import compressing

STAND_IN = "from producer.documents import ReadOptions\n" + TRANSLATE.replace(
    "RunOptions()", "RunOptions(read=ReadOptions(fields=('text',), columns=('text',)))"
)
DEMO = """
import sys
from cli import main
option = "--column" if ".csv" in sys.argv[1] else "--field"
main(["translate", sys.argv[1], "-o", sys.argv[2], option, "text"], prog_name="transqueue")
"""
PROBES = {"stand-in": STAND_IN, "demo": DEMO}
#: The raw `text` value of a record (JSON string; a CSV record's quoted second cell).
TEXT_VALUE = {
    "jsonl": re.compile(rb'"text": "((?:[^"\\]|\\.)*)"'),
    "csv": re.compile(rb'^\d+,"((?:[^"]|"")*)"'),
}
CJK = re.compile("[\u4e00-\u9fff]")


def write_records(path: Path, size: int, packed: bool, payload: int, sentences: Iterator[str]) -> int:
    """Write JSONL or CSV records with a `text` of `sentences` (and a `blob` of `payload`
    random bytes, base64) until `size` bytes are written (compressed ones when `packed`);
    the number of records."""
    rng = random.Random(0)
    table = ".csv" in path.suffixes
    with path.open("wb") as raw:
        handle = compressing(raw, path.suffix)
        written = handle.write(b"id,text,source,blob\r\n" if table else b"")
        n = 0
        while (raw.tell() if packed else written) < size:
            text = " ".join(islice(sentences, rng.randint(1, 3)))
            blob = base64.b64encode(rng.randbytes(payload)).decode("ascii")
            if table:  # the sentences hold no quotes
                line = f'{n},"{text}","generated, kept",{blob}\r\n'
            else:
                line = json.dumps({"id": n, "text": text, "source": "generated", "blob": blob}) + "\n"
            written += handle.write(line.encode("utf-8"))
            n += 1
        handle.close()
    return n


def decompressed_lines(path: Path) -> Iterator[bytes]:
    """The lines of a .gz or .zst file, decompressed (by gzip and zstandard themselves)."""
    with path.open("rb") as raw:
        reader = (
            gzip.GzipFile(fileobj=raw)
            if path.suffix == ".gz"
            else zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        )
        yield from io.BufferedReader(reader, 1 << 20)  # type: ignore[arg-type]


def compare(source: Path, target: Path) -> str:
    """Line by line, `target` (the translation) against `source`: line counts, lines that
    differ outside their `text` value, and `text` values translated (holding CJK)."""
    value = TEXT_VALUE["csv" if ".csv" in source.suffixes else "jsonl"]
    lines, other, translated, texts = [0, 0], 0, 0, 0
    for before, after in zip_longest(decompressed_lines(source), decompressed_lines(target)):
        lines[0] += before is not None
        lines[1] += after is not None
        old, new = (value.search(line) if line else None for line in (before, after))
        if old is None or new is None:
            other += before != after
            continue
        texts += 1
        other += before[: old.start(1)] + before[old.end(1) :] != after[: new.start(1)] + after[new.end(1) :]
        translated += bool(CJK.search(new.group(1).decode("utf-8")))
    return (
        f"{lines[1]:,} lines out, {lines[0]:,} in; {other} differ outside `text`; "
        f"{translated:,} of {texts:,} `text` values translated"
    )


def quarters(samples: list[tuple[float, float, float]]) -> str:
    """The highest RSS (MB) in each quarter of the run's time, "a / b / c / d"."""
    if not samples:
        return "n/a"
    end = samples[-1][0]
    highest = [0.0] * 4
    for seconds, mb, _ in samples:
        part = min(3, int(4 * seconds / end)) if end else 0
        highest[part] = max(highest[part], mb)
    return " / ".join(f"{mb:.0f}" for mb in highest)


def main() -> None:
    """Write the inputs (once), measure translate on each and check its output."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", default="4,16")
    parser.add_argument("--formats", default="jsonl.zst,csv.gz")
    parser.add_argument("--packed", action="store_true", help="sizes count compressed bytes")
    parser.add_argument("--payload-kb", type=int, default=0, help="KiB of random bytes (base64) a record")
    parser.add_argument("--model", choices=sorted(PROBES), default="stand-in")
    parser.add_argument("--corpus", type=Path, default=TATOEBA_CORPUS)
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "bench-stream")
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--record", type=Path)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    base = read_sentences(args.corpus, 10**6)
    rows = [
        "| input | compressed MB | records | result | peak RSS (MB) | RSS by quarter of the run (MB) "
        "| pysbd helper peak (MB) | seconds | output against input |",
        "| --- | ---: | ---: | --- | ---: | --- | ---: | ---: | --- |",
    ]
    for fmt in args.formats.split(","):
        for size in map(int, args.sizes_mb.split(",")):
            packed = "-packed" if args.packed else ""
            source = args.work / f"records-{size}mb{packed}-{args.payload_kb}kb.{fmt}"
            counted = source.with_name(source.name + ".records")
            if not counted.exists():
                records = write_records(
                    source, size * 1_000_000, args.packed, args.payload_kb * 1024, joined_sentences(base)
                )
                counted.write_text(f"{records}\n")
            with tempfile.TemporaryDirectory(prefix="bench-stream-out-") as out:
                run = measure(PROBES[args.model], source, Path(out), ROOT, dict(os.environ), args.timeout)
                outputs = sorted(Path(out).iterdir())
                check = compare(source, outputs[0]) if outputs else "no output"
            helper = max((tree for _, _, tree in run["samples"]), default=0.0)
            rows.append(
                f"| {source.name} | {source.stat().st_size / 1e6:,.1f} | {int(counted.read_text()):,} "
                f"| {run['result']} (exit {run['status']}) | {run['rss']:.0f} | {quarters(run['samples'])} "
                f"| {helper:.0f} | {run['seconds']:.0f} | {check} |"
            )
            print(rows[-1], flush=True)
    title = (
        f"translate ({args.model} model), streamed, {args.sizes_mb} MB "
        f"{'compressed' if args.packed else 'before compression'}, {args.payload_kb} KiB payload a record"
    )
    publish("\n".join(rows), args.record, title)


if __name__ == "__main__":
    main()
