"""Soak: a large job through 2 real workers while they are killed, paused and Redis crashes.

A corpus of distinct English sentences (Tatoeba, one per line of a .txt) is submitted once
to a real redis-server (AOF) and two `transqueue worker`s with the default lease settings.
While it runs, the script acts as a supervisor and as chaos:

- SIGKILLs a random worker every 30–60 s (and restarts it at once, as compose would);
- SIGSTOPs one worker for 60 s, once;
- SIGKILLs redis-server once and restarts it on the same AOF.

It then fetches the output and compares it line by line with `transqueue translate` of the
same file (the in-process path, same bundle), and reports sentences lost, duplicated,
misplaced and dead-lettered, the job time, and each worker life's peak RSS and RSS slope
(MB per 1,000 sentences it settled, fitted over its life's second half and over each
quarter of it). Not a CI test:

    python bench/soak.py --sentences 20000 --record bench/results/soak.md

With --no-chaos nothing is killed or paused and there is no `translate` reference (the
output's line count is checked instead): one long life per worker, to see whether its RSS
reaches a plateau. --joined makes each sentence two Tatoeba sentences joined into one
(bench_pool.joined_sentences), for more distinct sentences than Tatoeba's 27,661, none of
them in the translation memory:

    python bench/soak.py --workers 1 --no-chaos --joined --sentences 150000 \
        --record bench/results/soak.md
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from bench_pool import joined_sentences, read_sentences, rss_mb  # noqa: E402
from distributed_support import TRANSQUEUE_WORKER, RedisServer, Worker, wait_for  # noqa: E402
from report import publish  # noqa: E402

from models.builder.defaults import TATOEBA_CORPUS  # noqa: E402
from store.config import Settings  # noqa: E402
from store.jobstore import JobStore  # noqa: E402
from store.keys import JobKeys  # noqa: E402

TRANSQUEUE = (sys.executable, "-c", "from cli import main; main()")


@dataclass
class Life:
    """One worker process from start to death: its RSS samples against sentences settled."""

    name: str
    samples: list[tuple[int, float]] = field(default_factory=list)

    def peak(self) -> float:
        return max((mb for _, mb in self.samples), default=0.0)

    def slope(self) -> float | None:
        """MB per 1,000 settled sentences over the second half of the life (least squares)."""
        return fitted_slope(self.samples[len(self.samples) // 2 :])

    def quarters(self) -> list[tuple[float | None, float | None]]:
        """For each quarter of the sentences the life settled: its slope (as `slope`) and the
        RSS at its end (None for a quarter without samples)."""
        if not self.samples:
            return []
        first, last = self.samples[0][0], self.samples[-1][0]
        parts: list[list[tuple[int, float]]] = [[] for _ in range(4)]
        for settled, mb in self.samples:
            parts[min(3, 4 * (settled - first) // max(1, last - first))].append((settled, mb))
        return [(fitted_slope(part), part[-1][1] if part else None) for part in parts]


def fitted_slope(samples: list[tuple[int, float]]) -> float | None:
    """MB per 1,000 settled sentences over `samples` (least squares); None when they span
    fewer than 500 sentences or 5 samples."""
    if len(samples) < 5 or samples[-1][0] - samples[0][0] < 500:
        return None
    n = len(samples)
    mx, my = sum(x for x, _ in samples) / n, sum(y for _, y in samples) / n
    var = sum((x - mx) ** 2 for x, _ in samples)
    return 1000 * sum((x - mx) * (y - my) for x, y in samples) / var if var else None


class Supervisor:
    """Runs the workers, samples their RSS, and (`run`) kills, pauses and restarts them."""

    def __init__(self, redis: RedisServer, env: dict[str, str], log_dir: Path, store: JobStore) -> None:
        self.redis, self.env, self.log_dir, self.store = redis, env, log_dir, store
        self.workers: dict[str, Worker] = {}
        self.lives: list[Life] = []
        self.current: dict[str, Life] = {}
        self.events: list[str] = []
        self.job_id = ""
        self.done = threading.Event()

    def start(self, name: str) -> None:
        worker = Worker(
            f"{name}-{len(self.lives)}", self.env, self.log_dir, TRANSQUEUE_WORKER, ("--concurrency=1",)
        )
        self.workers[name] = worker.start()
        self.current[name] = Life(worker.name)
        self.lives.append(self.current[name])

    def settled(self) -> int:
        try:
            info = self.store.info(self.job_id) if self.job_id else None
        except Exception:  # Redis down: sample again later
            return -1
        return info.settled if info else 0

    def sample(self) -> None:
        while not self.done.is_set():
            settled = self.settled()
            for name, worker in self.workers.items():
                mb = rss_mb(worker.process.pid)
                if settled >= 0 and mb:
                    self.current[name].samples.append((settled, mb))
            time.sleep(1.0)

    def note(self, what: str, started: float) -> None:
        self.events.append(f"{time.monotonic() - started:6.1f} s: {what}")
        print(self.events[-1], flush=True)

    def run(self, started: float, rng: random.Random) -> None:
        """The chaos schedule, until the job is finished."""
        plan = [(20.0, "stop"), (90.0, "redis")]
        next_kill = 40.0
        while not self.done.wait(1.0):
            now = time.monotonic() - started
            if plan and now >= plan[0][0]:
                action = plan.pop(0)[1]
                if action == "stop":
                    victim = self.workers["w1"]
                    os.killpg(victim.process.pid, signal.SIGSTOP)
                    self.note("SIGSTOP w1 for 60 s", started)
                    threading.Timer(60.0, resume, args=[victim.process.pid]).start()
                else:
                    self.redis.kill()
                    self.note("SIGKILL redis-server", started)
                    time.sleep(2.0)
                    self.redis.start()
                    self.note("redis-server restarted (AOF)", started)
            elif now >= next_kill:
                name = rng.choice(sorted(self.workers))
                self.workers[name].kill()
                self.note(f"SIGKILL {name}, restarted", started)
                self.start(name)
                next_kill = now + rng.uniform(30.0, 60.0)


def resume(pid: int) -> None:
    """SIGCONT a stopped process group, unless it was killed meanwhile."""
    try:
        os.killpg(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass


def translate_reference(corpus: Path, out: Path, bundle: str) -> float:
    started = time.perf_counter()
    model = ["--model", bundle] if bundle else []
    subprocess.run([*TRANSQUEUE, "translate", str(corpus), "-o", str(out), *model], check=True, cwd=ROOT)
    return time.perf_counter() - started


def corpus_sentences(path: Path, count: int, joined: bool) -> list[str]:
    """`count` distinct sentences of the corpus at `path`, or of its sentences joined in pairs."""
    if joined:
        return list(islice(joined_sentences(read_sentences(path, 10**6)), count))
    return read_sentences(path, count)


def life_rows(lives: list[Life]) -> list[str]:
    """The table of worker lives: sentences, peak RSS, slopes over the 2nd half and quarters."""

    def shown(slope: float | None) -> str:
        return "n/a" if slope is None else f"{slope:+.2f}"

    rows = [
        "| worker life | sentences settled | peak RSS (MB) | RSS slope, 2nd half (MB / 1,000 sentences) "
        "| slope by quarter of the life | RSS at the end of each quarter (MB) |",
        "| --- | ---: | ---: | ---: | --- | --- |",
    ]
    for life in lives:
        quarters = life.quarters()
        span = life.samples[-1][0] - life.samples[0][0] if life.samples else 0
        rows.append(
            f"| {life.name} | {span:,} | {life.peak():.0f} | {shown(life.slope())} "
            f"| {' / '.join(shown(slope) for slope, _ in quarters)} "
            f"| {' / '.join('n/a' if mb is None else f'{mb:.0f}' for _, mb in quarters)} |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bundle", default="", help="bundle directory (default: the demo model)")
    parser.add_argument("--corpus", type=Path, default=TATOEBA_CORPUS)
    parser.add_argument("--sentences", type=int, default=20000)
    parser.add_argument("--joined", action="store_true", help="sentences: Tatoeba sentences joined in pairs")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--chaos", action=argparse.BooleanOptionalAction, default=True, help="kill and pause (default: on)"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--samples", type=Path, help="write every RSS sample here (CSV: life, settled, MB)")
    parser.add_argument("--record", type=Path, help="append the report to this Markdown file")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        corpus = tmp_path / "corpus.txt"
        sentences = corpus_sentences(args.corpus, args.sentences, args.joined)
        corpus.write_text("\n".join(sentences) + "\n", encoding="utf-8")
        if args.chaos:
            reference_seconds = translate_reference(corpus, tmp_path / "reference.txt", args.bundle)
        redis = RedisServer(tmp_path / "redis")
        redis.start()
        env = {"TRANSQUEUE_REDIS_URL": redis.url, "TRANSQUEUE_BUNDLE": args.bundle}
        if args.chaos:  # 2 workers on 2 cores: one thread each
            env["TRANSQUEUE_THREADS"] = "1"
        store = JobStore.from_settings(Settings(redis_url=redis.url), patience=60)
        supervisor = Supervisor(redis, env, tmp_path, store)
        try:
            for n in range(1, args.workers + 1):
                supervisor.start(f"w{n}")
            sampler = threading.Thread(target=supervisor.sample, daemon=True)
            sampler.start()
            started = time.monotonic()
            submitted = subprocess.run(
                [*TRANSQUEUE, "submit", str(corpus), "--out", str(tmp_path / "out")],
                env={**os.environ, **env},
                cwd=ROOT,
                check=True,
                capture_output=True,
                text=True,
            )
            supervisor.job_id = submitted.stdout.strip()
            runner = threading.Thread(target=supervisor.run, args=(started, rng), daemon=True)
            if args.chaos:
                runner.start()
            wait_for(
                lambda: store.info(supervisor.job_id).finished, "the soak job", timeout=6 * 3600, interval=1.0
            )
            job_seconds = time.monotonic() - started
            supervisor.done.set()
            if args.chaos:
                runner.join()
            sampler.join()
            info = store.info(supervisor.job_id)
            results = store.client.hlen(JobKeys(supervisor.job_id).results)
            subprocess.run([*TRANSQUEUE, "fetch", supervisor.job_id], env={**os.environ, **env}, cwd=ROOT)
        finally:
            for worker in supervisor.workers.values():
                worker.kill()
            redis.kill()
        got = (tmp_path / "out" / "corpus.zh.txt").read_text(encoding="utf-8").splitlines()
        if args.chaos:
            expected = (tmp_path / "reference.txt").read_text(encoding="utf-8").splitlines()
    if args.samples:
        args.samples.write_text(
            "life,settled,rss_mb\n"
            + "".join(f"{life.name},{x},{mb:.1f}\n" for life in supervisor.lives for x, mb in life.samples)
        )
    kind = "Tatoeba sentences joined in pairs" if args.joined else "Tatoeba sentences"
    threads = "1 thread each" if args.chaos else "default threads"
    lines = [
        f"corpus: {args.sentences} distinct {kind}, {info.total} distinct segments; "
        f"{args.workers} worker(s) (solo, {threads}), default leases, "
        f"{'chaos' if args.chaos else 'no chaos'}; bundle {args.bundle or 'demo'}",
        "",
        "| measure | value |",
        "| --- | ---: |",
        f"| job time{' with chaos' if args.chaos else ''} (s) | {job_seconds:.0f} |",
        f"| sentences settled / distinct | {info.settled} / {info.total} |",
        f"| lost (unsettled) | {info.total - info.settled} |",
        f"| duplicated (results beyond one per sentence) | {results + info.dead - info.total} |",
        f"| dead-lettered | {info.dead} |",
        f"| output lines / input lines | {len(got)} / {len(sentences)} |",
    ]
    if args.chaos:
        misplaced = sum(a != b for a, b in zip(got, expected, strict=False)) + abs(len(got) - len(expected))
        lines[5:5] = [f"| same file with `transqueue translate`, no chaos (s) | {reference_seconds:.0f} |"]
        lines[-1:-1] = [f"| misplaced (output lines differing from `translate`) | {misplaced} |"]
    lines += ["", *life_rows(supervisor.lives)]
    if supervisor.events:
        lines += ["", "Events:", "", *(f"- {event}" for event in supervisor.events)]
    publish("\n".join(lines), args.record, "soak" if args.chaos else "soak, one long life per worker")
    print(json.dumps({"lost": info.total - info.settled, "dead": info.dead}))


if __name__ == "__main__":
    main()
