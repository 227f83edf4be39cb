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
(MB per 1,000 sentences it settled, fitted over its life's second half). Not a CI test:

    python bench/soak.py --sentences 20000 --record bench/soak_results.md
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from bench_pool import read_sentences, rss_mb  # noqa: E402
from distributed_support import TRANSQUEUE_WORKER, RedisServer, Worker, wait_for  # noqa: E402
from report import publish  # noqa: E402

from store.config import Settings  # noqa: E402
from store.jobstore import JobStore  # noqa: E402
from store.keys import JobKeys  # noqa: E402

DEFAULT_CORPUS = ROOT.parent / "shared" / "data" / "en-zh" / "cmn_hans.txt"
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
        half = self.samples[len(self.samples) // 2 :]
        if len(half) < 5 or half[-1][0] - half[0][0] < 500:
            return None
        n = len(half)
        mx, my = sum(x for x, _ in half) / n, sum(y for _, y in half) / n
        var = sum((x - mx) ** 2 for x, _ in half)
        return 1000 * sum((x - mx) * (y - my) for x, y in half) / var if var else None


class Chaos:
    """Runs the workers, restarts the killed ones, and samples their RSS."""

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bundle", default="", help="bundle directory (default: the demo model)")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--sentences", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--record", type=Path, help="append the report to this Markdown file")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        corpus = tmp_path / "corpus.txt"
        corpus.write_text("\n".join(read_sentences(args.corpus, args.sentences)) + "\n", encoding="utf-8")
        reference_seconds = translate_reference(corpus, tmp_path / "reference.txt", args.bundle)
        redis = RedisServer(tmp_path / "redis")
        redis.start()
        env = {"TRANSQUEUE_REDIS_URL": redis.url, "TRANSQUEUE_BUNDLE": args.bundle, "TRANSQUEUE_THREADS": "1"}
        store = JobStore.from_settings(Settings(redis_url=redis.url), patience=60)
        chaos = Chaos(redis, env, tmp_path, store)
        try:
            chaos.start("w1")
            chaos.start("w2")
            sampler = threading.Thread(target=chaos.sample, daemon=True)
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
            chaos.job_id = submitted.stdout.strip()
            runner = threading.Thread(target=chaos.run, args=(started, rng), daemon=True)
            runner.start()
            wait_for(
                lambda: store.info(chaos.job_id).finished, "the soak job", timeout=6 * 3600, interval=1.0
            )
            job_seconds = time.monotonic() - started
            chaos.done.set()
            runner.join()
            sampler.join()
            info = store.info(chaos.job_id)
            results = store.client.hlen(JobKeys(chaos.job_id).results)
            subprocess.run([*TRANSQUEUE, "fetch", chaos.job_id], env={**os.environ, **env}, cwd=ROOT)
        finally:
            for worker in chaos.workers.values():
                worker.kill()
            redis.kill()
        expected = (tmp_path / "reference.txt").read_text(encoding="utf-8").splitlines()
        got = (tmp_path / "out" / "corpus.zh.txt").read_text(encoding="utf-8").splitlines()
    misplaced = sum(a != b for a, b in zip(got, expected, strict=False)) + abs(len(got) - len(expected))
    lines = [
        f"corpus: {args.sentences} distinct Tatoeba sentences, {info.total} distinct segments; "
        f"2 workers (solo, 1 thread each), default leases; bundle {args.bundle or 'demo'}",
        "",
        "| measure | value |",
        "| --- | ---: |",
        f"| job time with chaos (s) | {job_seconds:.0f} |",
        f"| same file with `transqueue translate`, no chaos (s) | {reference_seconds:.0f} |",
        f"| sentences settled / distinct | {info.settled} / {info.total} |",
        f"| lost (unsettled) | {info.total - info.settled} |",
        f"| duplicated (results beyond one per sentence) | {results + info.dead - info.total} |",
        f"| misplaced (output lines differing from `translate`) | {misplaced} |",
        f"| dead-lettered | {info.dead} |",
        "",
        "| worker life | peak RSS (MB) | RSS slope, 2nd half (MB / 1,000 sentences) |",
        "| --- | ---: | ---: |",
        *(
            f"| {life.name} | {life.peak():.0f} | "
            f"{'n/a (short life)' if life.slope() is None else f'{life.slope():+.2f}'} |"
            for life in chaos.lives
        ),
        "",
        "Events:",
        "",
        *(f"- {event}" for event in chaos.events),
    ]
    publish("\n".join(lines), args.record, "soak")
    print(json.dumps({"lost": info.total - info.settled, "misplaced": misplaced, "dead": info.dead}))


if __name__ == "__main__":
    main()
