"""Which Celery pool and chunk size should a 2-core worker run? Measure, side by side.

Pool candidates (each a whole worker owning the same 2 cores):

- ``prefork-2x1``: prefork pool, 2 processes, a Translator with 1 thread in each;
- ``solo-1x2``: solo pool, 1 process, a Translator decoding 2 batches side by side (the
  default: `TRANSQUEUE_POOL=solo`, `TRANSQUEUE_THREADS=2`);
- ``threads-2x1``: threads pool, 2 Celery threads sharing one Translator with 1 thread;
- ``threads-2x2``: threads pool, 2 Celery threads sharing one Translator with 2 threads
  (two chunks at once, and a lone chunk still gets both cores).

Chunk sizes (``--chunk-sizes``): the sentences per task that the producer cuts
(`TRANSQUEUE_CHUNK_SIZE`); a worker decodes a chunk's rows in batches of one padded
length and at most ``--max-batches`` rows (`TRANSQUEUE_MAX_BATCH`), its threads side by
side, so the chunk size decides how full the batches are and whether every thread gets one.

For each (pool, chunk size, max batch) the script starts a real redis-server and a real
``transqueue worker``, times it until it logs that it is ready (process start, imports
and the model loaded; the bundle's files read once before, so that they are in the page
cache), translates the same sentences as one job (memory flushed, model
warmed up first), and reports the ready time, sentences/s, the ratio to the best case,
and the peak resident memory of the largest process (its kernel high-water mark, VmHWM)
and of the whole worker (sampled every 0.2 s, at least the largest process's peak: what a
``mem_limit: 512m`` container must hold), min–max over ``--rounds`` interleaved rounds.
Run it on an otherwise idle machine, with the bundle the workers will really run
(opus-mt-en-zh size):

    python bench/bench_pool.py --bundle bundles/opus-mt-en-zh --sentences 300 \\
        --pools solo-1x2 --chunk-sizes 16 32 64 --max-batches 8 16 32 --rounds 3 \\
        --record bench/results/pool.md

Pin it to 2 cores (``taskset -c 0,1``) on a bigger machine, so the candidates get what a
``cpus: 2`` container gets.
"""

from __future__ import annotations

import argparse
import itertools
import random
import re
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from build_cache import compile_package, padded_source, page_in  # noqa: E402
from distributed_support import TRANSQUEUE_WORKER, RedisServer, Worker, wait_for  # noqa: E402
from report import publish  # noqa: E402

from models.bundle import default_bundle_dir  # noqa: E402
from producer.documents import ReadOptions  # noqa: E402
from producer.jobs import JobBuilder, Source  # noqa: E402
from store.config import Settings  # noqa: E402
from store.defaults import CHUNK_SIZE, MAX_BATCH  # noqa: E402
from store.jobstore import JobStore  # noqa: E402

#: name: (TRANSQUEUE_POOL, TRANSQUEUE_CONCURRENCY, TRANSQUEUE_THREADS). Set through the
#: environment: Celery replaces a --pool=prefork flag by the configured pool.
CANDIDATES = {
    "prefork-2x1": ("prefork", 2, 1),
    "solo-1x2": ("solo", 1, 2),
    "threads-2x1": ("threads", 2, 1),
    "threads-2x2": ("threads", 2, 2),
}
_ONE_SENTENCE = re.compile(r"[^.!?;:…\"]+\.")
DEFAULT_CORPUS = ROOT / "tests" / "data" / "tiny_corpus.tsv"


@dataclass(frozen=True)
class Measurement:
    name: str
    chunk_size: int
    max_batch: int
    sentences: int
    seconds: float
    ready_seconds: float  # from process start until the worker logs that it is ready
    peak_rss_mb: float  # the largest single process
    peak_total_mb: float  # the whole worker (parent and pool children), as a container sees it

    @property
    def rate(self) -> float:
        return self.sentences / self.seconds


def read_sentences(path: Path, count: int) -> list[str]:
    """The first `count` distinct English sentences of a TSV/text corpus (first column)."""
    seen: dict[str, None] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        text = line.split("\t")[0].strip()
        if text:
            seen.setdefault(text, None)
        if len(seen) == count:
            break
    return list(seen)


def joined_sentences(base: list[str], seed: int = 0) -> Iterator[str]:
    """Distinct English sentences without end, each two different sentences of `base` joined
    into one by ", and " ("It's raining, and we stay home."), in a shuffled order.

    Only sentences of `base` that end in "." and hold no other sentence end (".!?;:…" or a
    quote) are joined, so a result has no sentence end inside and stays one sentence to
    the segmenter. The second keeps its capital only for a word that `base` never writes in
    lower case (names, "I"). A pair joined once is never joined again: the shifts
    1, 2, ... of the shuffled list give len(pool) new pairs each.
    """
    pool = [text for text in base if _ONE_SENTENCE.fullmatch(text)]
    random.Random(seed).shuffle(pool)
    lower = {word for text in base for word in text.split() if word[:1].islower()}
    seen: set[str] = set()
    for shift in range(1, len(pool)):
        for i, first in enumerate(pool):
            second = pool[(i + shift) % len(pool)]
            if second.split()[0].lower() in lower:
                second = second[0].lower() + second[1:]
            joined = f"{first[:-1]}, and {second}"
            if joined not in seen:
                seen.add(joined)
                yield joined


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (from /proc). A process's children are listed under the
    thread that forked them, so every thread's list is read: Celery's prefork pool starts
    its processes from threads other than the main one."""
    pids, todo = [], [pid]
    while todo:
        current = todo.pop()
        pids.append(current)
        for listing in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                todo.extend(int(c) for c in listing.read_text().split())
            except OSError:
                continue
    return pids


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """Resident memory of one process in MB (0 if it is gone): `field` "VmRSS" for now,
    "VmHWM" for its peak so far."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def run_job(store: JobStore, sentences: list[str]) -> float:
    """Submit `sentences` as one job and return the seconds until it is finished."""
    started = time.perf_counter()
    job = JobBuilder(store, ReadOptions())
    job.add(Source("bench.txt", text="\n".join(sentences), fmt="txt"))
    job_id = job.submit(out="", origin="bench")
    wait_for(lambda: store.info(job_id).finished, "the job", timeout=3600, interval=0.05)
    return time.perf_counter() - started


def measure(
    case: tuple[str, int, int], redis: RedisServer, bundle: str, sentences: list[str], log_dir: Path
) -> Measurement:
    name, chunk_size, max_batch = case
    pool, concurrency, threads = CANDIDATES[name]
    env = {
        "TRANSQUEUE_REDIS_URL": redis.url,
        "TRANSQUEUE_BUNDLE": bundle,
        "TRANSQUEUE_POOL": pool,
        "TRANSQUEUE_CONCURRENCY": str(concurrency),
        "TRANSQUEUE_THREADS": str(threads),
        "TRANSQUEUE_MAX_BATCH": str(max_batch),
    }
    redis.client().flushall()
    log_dir = log_dir / f"{name}-{chunk_size}-{max_batch}"  # a worker is ready when its own log says so
    log_dir.mkdir(parents=True)
    page_in(bundle or default_bundle_dir())
    compile_package()
    started = time.perf_counter()
    worker = Worker(name, env, log_dir, TRANSQUEUE_WORKER, options=()).start(wait=False)
    wait_for(worker.ready, f"worker {name} to be ready", interval=0.005, detail=worker.log_text)
    ready = time.perf_counter() - started
    peak = total = 0.0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak, total
        while not done.is_set():
            sizes = [rss_mb(p) for p in process_tree(worker.process.pid)]
            peak, total = max([peak, *sizes]), max(total, sum(sizes))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        store = JobStore.from_settings(
            Settings(redis_url=redis.url, chunk_size=chunk_size, bundle=bundle)
        )  # its queue; the producer cuts the chunks
        run_job(store, [f"Warm up {i}." for i in range(8)])
        seconds = run_job(store, sentences)
        # Samples miss short peaks; each process's own high-water mark does not.
        peak = max([peak, *(rss_mb(p, "VmHWM") for p in process_tree(worker.process.pid))])
        total = max(total, peak)
    finally:
        done.set()
        sampler.join()
        worker.stop()
    return Measurement(name, chunk_size, max_batch, len(sentences), seconds, ready, peak, total)


def _span(values: list[float], digits: int) -> str:
    """min–max of `values`, or one number when they round alike."""
    low, high = (f"{value:.{digits}f}" for value in (min(values), max(values)))
    return low if low == high else f"{low}–{high}"


def report(results: list[Measurement]) -> str:
    """One row per (pool, chunk size, max batch): min–max over rounds; the ratio is of medians."""
    cases: dict[tuple[str, int, int], list[Measurement]] = {}
    for result in results:
        cases.setdefault((result.name, result.chunk_size, result.max_batch), []).append(result)
    medians = {case: statistics.median(r.rate for r in rounds) for case, rounds in cases.items()}
    best = max(medians.values())
    lines = [
        "| pool | chunk size | max batch | ready (s) | sentences/s | ratio to best | "
        "peak RSS, largest process (MB) | peak RSS, whole worker (MB) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {name} | {chunk} | {batch} | {_span([r.ready_seconds for r in rounds], 2)} | "
        f"{_span([r.rate for r in rounds], 1)} | "
        f"{medians[name, chunk, batch] / best:.2f} | {_span([r.peak_rss_mb for r in rounds], 0)} | "
        f"{_span([r.peak_total_mb for r in rounds], 0)} |"
        for (name, chunk, batch), rounds in cases.items()
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bundle", default="", help="bundle directory (default: demo model)")
    parser.add_argument(
        "--source-pieces",
        type=int,
        default=0,
        help="pad the bundle's source tokenizer to this many pieces (build_cache.padded_source): "
        "an opus-mt source.spm's size, for its load time",
    )
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--sentences", type=int, default=400)
    parser.add_argument("--pools", nargs="+", default=list(CANDIDATES), choices=CANDIDATES)
    parser.add_argument(
        "--chunk-sizes", nargs="+", type=int, default=[CHUNK_SIZE], help="sentences per task (producer side)"
    )
    parser.add_argument(
        "--max-batches", nargs="+", type=int, default=[MAX_BATCH], help="rows per batch (worker side)"
    )
    parser.add_argument("--rounds", type=int, default=1, help="measurements of each case, interleaved")
    parser.add_argument("--record", type=Path, help="append the table to this Markdown file")
    args = parser.parse_args()
    if args.source_pieces:
        args.bundle = str(padded_source(Path(args.bundle or default_bundle_dir()), args.source_pieces))
    sentences = read_sentences(args.corpus, args.sentences)
    cases = list(itertools.product(args.pools, args.chunk_sizes, args.max_batches))
    results = measure_rounds(cases, args.bundle, sentences, args.rounds)
    publish(report(results), args.record, f"{len(sentences)} sentences, bundle {args.bundle or 'demo'}")


def measure_rounds(
    cases: list[tuple[str, int, int]], bundle: str, sentences: list[str], rounds: int
) -> list[Measurement]:
    """Every case measured `rounds` times, the cases interleaved in each round, on a real
    redis-server of their own (bench_ct2.py's W4 runs the default case so)."""
    with tempfile.TemporaryDirectory() as tmp:
        redis = RedisServer(Path(tmp) / "redis")
        redis.start()
        try:
            return [
                measure(case, redis, bundle, sentences, Path(tmp) / f"round-{number}")
                for number in range(rounds)
                for case in cases
            ]
        finally:
            redis.kill()


if __name__ == "__main__":
    main()
