"""Which Celery pool should a 2-core worker run? Measure, side by side, on this machine.

Candidates (each a whole worker owning the same 2 cores):

- ``prefork-2x1``: prefork pool, 2 processes, 1 ONNX Runtime thread each (the default);
- ``solo-1x2``: solo pool, 1 process, 2 intra-op threads;
- ``threads-2x1``: threads pool, 2 threads sharing one Translator, 1 intra-op thread.

For each one the script starts a real redis-server and a real worker, translates the same
sentences as one job (memory flushed, model warmed up first), and reports sentences/s, the
ratio to the best candidate, and the peak resident memory of the largest process and of the
whole worker (what a ``mem_limit: 512m`` container must hold). Run it on an otherwise idle
machine, with the bundle the workers will really run (opus-mt-en-zh size):

    python bench/bench_pool.py --bundle bundles/opus-mt-en-zh --sentences 400 \\
        --record bench/pool_results.md

Pin it to 2 cores (``taskset -c 0,1``) on a bigger machine, so the candidates get what a
``cpus: 2`` container gets.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from distributed_support import RedisServer, Worker, wait_for  # noqa: E402
from report import publish  # noqa: E402

from producer.documents import ReadOptions  # noqa: E402
from producer.jobs import JobBuilder, Source  # noqa: E402
from store.config import Settings  # noqa: E402
from store.jobstore import JobStore  # noqa: E402

CANDIDATES = {
    "prefork-2x1": (("--pool=prefork", "--concurrency=2"), 1),
    "solo-1x2": (("--pool=solo", "--concurrency=1"), 2),
    "threads-2x1": (("--pool=threads", "--concurrency=2"), 1),
}
_ONE_SENTENCE = re.compile(r"[^.!?;:…\"]+\.")
DEFAULT_CORPUS = ROOT / "tests" / "data" / "tiny_corpus.tsv"


@dataclass(frozen=True)
class Measurement:
    name: str
    sentences: int
    seconds: float
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
    """`pid` and its descendants (from /proc)."""
    pids, todo = [], [pid]
    while todo:
        current = todo.pop()
        pids.append(current)
        try:
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        todo.extend(int(c) for c in children)
    return pids


def rss_mb(pid: int) -> float:
    """Resident memory of one process in MB (0 if it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
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


def measure(name: str, redis: RedisServer, bundle: str, sentences: list[str], log_dir: Path) -> Measurement:
    options, threads = CANDIDATES[name]
    env = {"TRANSQUEUE_REDIS_URL": redis.url, "TRANSQUEUE_BUNDLE": bundle, "TRANSQUEUE_THREADS": str(threads)}
    redis.client().flushall()
    worker = Worker(name, env, log_dir, options=options).start()
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
            Settings(redis_url=redis.url, chunk_size=16, bundle=bundle)
        )  # its queue
        run_job(store, [f"Warm up {i}." for i in range(8)])
        seconds = run_job(store, sentences)
    finally:
        done.set()
        sampler.join()
        worker.stop()
    return Measurement(name, len(sentences), seconds, peak, total)


def report(results: list[Measurement]) -> str:
    best = max(r.rate for r in results)
    lines = [
        "| pool | sentences/s | ratio to best | peak RSS, largest process (MB) | "
        "peak RSS, whole worker (MB) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {r.name} | {r.rate:.2f} | {r.rate / best:.2f} | {r.peak_rss_mb:.0f} | {r.peak_total_mb:.0f} |"
        for r in results
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bundle", default="", help="bundle directory (default: demo model)")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--sentences", type=int, default=400)
    parser.add_argument("--pools", nargs="+", default=list(CANDIDATES), choices=CANDIDATES)
    parser.add_argument("--record", type=Path, help="append the table to this Markdown file")
    args = parser.parse_args()
    sentences = read_sentences(args.corpus, args.sentences)
    with tempfile.TemporaryDirectory() as tmp:
        redis = RedisServer(Path(tmp) / "redis")
        redis.start()
        try:
            results = [measure(name, redis, args.bundle, sentences, Path(tmp)) for name in args.pools]
        finally:
            redis.kill()
    publish(report(results), args.record, f"{len(sentences)} sentences, bundle {args.bundle or 'demo'}")


if __name__ == "__main__":
    main()
