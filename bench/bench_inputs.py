"""Peak memory and time of `transqueue translate`, `submit` and `fetch` on big inputs.

    python bench/bench_inputs.py [--size-mb 50] [--inputs ordinary,one-line,markdown,reflow]
                                 [--commands translate,submit,fetch] [--code DIR --label NAME]
                                 [--timeout 1800] [--record bench/results/inputs.md]

Inputs, --size-mb each, written once under --work:
- ordinary.txt: lines of one to three generated English sentences (about 130 bytes a line);
- one-line.txt: the same kind of sentences on one single line;
- markdown.md: sections of a document: a heading, then paragraphs hard-wrapped at 80
  columns, bullet lists, fenced code and tables, a blank line between blocks;
- reflow.txt: paragraphs of three to eight sentences hard-wrapped at 72 columns, a blank line
  between them, read with --reflow;
- big-paragraphs.txt: the same, but paragraphs of about 4 MB, just under the block limit
  (TRANSQUEUE_MAX_BLOCK_BYTES, 4 MiB): the biggest windows a --reflow file can have;
- big-fences.md: fenced code blocks of about 4 MB, each after a short paragraph: big
  windows of a Markdown file (a paragraph of 4 MB costs more, as in big-paragraphs);
- big-tables.md: tables of about 4 MB, rows of two short cells: many small sentences, which
  windows cut between rows.

Each measurement is a fresh Python process running the code of --code (default: this
checkout), whose peak RSS (VmHWM of /proc/PID/status) and wall time are reported:
- translate: the in-process path through the Python API, plan_files -> read_tasks ->
  translate_files, with a stand-in injected in place of the model that answers each
  sentence at once with Chinese-sized text (one CJK character per three English ones).
  Reading, parsing, segmenting, the run's translation memory, rendering and writing are
  measured; model decoding is not (it would take days for 50 MB).
- submit: the real command, cli.main(["submit", FILE, "--out", DIR]), against a redis-server
  started here on a queue nobody consumes: reading, parsing, planning, storing the job in
  Redis and queueing its chunks.
- fetch (after submit): every slot of the submitted job is first settled with the stand-in's
  text, written straight into the job's results (a process of its own, not measured); then
  the real command, cli.main(["fetch", JOB, "--out", DIR]), renders and writes the document.
The pysbd helper process that segmentation talks to is a process of its own and is not
counted. A process still running after --timeout seconds is killed and reported with the
peak it had reached.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests")]

from bench_pool import process_tree, rss_mb  # noqa: E402
from distributed_support import RedisServer  # noqa: E402
from report import publish  # noqa: E402

WORDS = (
    "the cat sat on a mat while Dr. Smith read 42 books about U.S. history and tea in the "
    "garden of his old house near the station"
).split()

# Each probe reports its own VmHWM when it ends (the parent's polling could miss a short peak).
REPORT_PEAK = """
import atexit, re
atexit.register(lambda: print("VmHWM " + re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read())[1]))
"""

TRANSLATE = """
import sys
from pathlib import Path
from producer.documents import ReadOptions
from producer.files import plan_files
from producer.pipeline import RunOptions, RunReport, read_tasks, translate_files

class Result:
    hit_length_cap = False
    def __init__(self, sentence): self.text = "译" * (len(sentence) // 3 + 1)

class StandIn:
    fingerprint = "stand-in"
    def translate(self, sentences): return (Result(s) for s in sentences)
    def translate_one(self, sentence): return Result(sentence)

report = RunReport()
options = RunOptions(read=ReadOptions(reflow="--reflow" in sys.argv[3:]))
documents = read_tasks(plan_files([Path(sys.argv[1])], Path(sys.argv[2])), options, report)
translate_files(documents, StandIn(), report)
print(report.errors[0] if report.errors else f"{report.sentences} sentences written")
"""

SUBMIT = """
import sys
from cli import main
main(["submit", sys.argv[1], "--out", sys.argv[2], *sys.argv[3:]], prog_name="transqueue")
"""


FETCH = """
import sys
from cli import main
main(["fetch", sys.argv[1], "--out", sys.argv[2]], prog_name="transqueue")
"""

# Settles every slot of job argv[1] as if workers had translated it, like the stand-in.
SETTLE = """
import sys, time
from store.config import env_settings
from store.jobstore import JobStore
from store.keys import JobKeys
store, job = JobStore.from_settings(env_settings()), sys.argv[1]
info, keys = store.info(job), JobKeys(job)
for _, items in store.chunks(job, info.chunks):
    store.client.hset(keys.results, mapping={slot: "译" * (len(text) // 3 + 1) for slot, text in items})
store.client.hset(keys.meta, mapping={"done": info.total, "state": "done", "finished_at": time.time()})
"""

PROBES = {"translate": TRANSLATE, "submit": SUBMIT, "fetch": FETCH}


def sentence(rng: random.Random) -> str:
    """One generated English sentence."""
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 18)))
    return words[0].upper() + words[1:] + rng.choice(".?!.")


def sentences(rng: random.Random, low: int, high: int) -> str:
    """Between `low` and `high` generated sentences, joined by spaces."""
    return " ".join(sentence(rng) for _ in range(rng.randint(low, high)))


def ordinary(rng: random.Random) -> str:
    """A line of one to three sentences."""
    return sentences(rng, 1, 3) + "\n"


def one_line(rng: random.Random) -> str:
    """A sentence of the single line (ended once the file is written)."""
    return sentence(rng) + " "


def markdown(rng: random.Random) -> str:
    """A block of a Markdown document and the blank line after it: mostly paragraphs, with
    headings, lists, fenced code and tables."""
    kind = rng.random()
    if kind < 0.1:
        return f"## {sentence(rng).rstrip('.?!')}\n\n"
    if kind < 0.25:
        return "".join(f"- {sentences(rng, 1, 2)}\n" for _ in range(rng.randint(2, 5))) + "\n"
    if kind < 0.32:
        code = "".join(
            f"    run({i}, {' '.join(rng.choices(WORDS, k=3))!r})\n" for i in range(rng.randint(2, 8))
        )
        return f"```python\n{code}```\n\n"
    if kind < 0.37:
        rows = "".join(f"| {sentence(rng)} | {rng.randint(1, 999)} |\n" for _ in range(rng.randint(2, 6)))
        return "| Text | Count |\n| --- | ---: |\n" + rows + "\n"
    return textwrap.fill(sentences(rng, 2, 6), 80) + "\n\n"


def reflow(rng: random.Random) -> str:
    """A hard-wrapped paragraph of three to eight sentences and the blank line after it."""
    return textwrap.fill(sentences(rng, 3, 8), 72) + "\n\n"


#: Bytes of a block of big-paragraphs, big-fences and big-tables: just under the block limit
#: (4 MiB).
BIG_BLOCK = 4_000_000


def big_paragraph(rng: random.Random) -> str:
    """A hard-wrapped paragraph of about BIG_BLOCK bytes and the blank line after it."""
    lines, size = [], 0
    while size < BIG_BLOCK:
        lines.append(textwrap.fill(sentences(rng, 3, 8), 72))
        size += len(lines[-1]) + 1
    return "\n".join(lines) + "\n\n"


def big_fence(rng: random.Random) -> str:
    """A paragraph, then a fenced code block of about BIG_BLOCK bytes, each followed by a
    blank line."""
    lines, size = [], 0
    while size < BIG_BLOCK:
        lines.append(f"    run({size}, {' '.join(rng.choices(WORDS, k=5))!r})\n")
        size += len(lines[-1])
    return textwrap.fill(sentences(rng, 2, 6), 80) + "\n\n```python\n" + "".join(lines) + "```\n\n"


def big_table(rng: random.Random) -> str:
    """A table of about BIG_BLOCK bytes, rows of a short sentence and a number, and the blank
    line after it."""
    rows, size = ["| Text | Count |\n| --- | ---: |\n"], 0
    while size < BIG_BLOCK:
        rows.append(f"| {sentence(rng)} | {rng.randint(1, 999)} |\n")
        size += len(rows[-1])
    return "".join(rows) + "\n"


#: Each input kind: its suffix, the options it is read with, and its pieces.
KINDS: dict[str, tuple[str, tuple[str, ...], Callable[[random.Random], str]]] = {
    "ordinary": (".txt", (), ordinary),
    "one-line": (".txt", (), one_line),
    "markdown": (".md", (), markdown),
    "reflow": (".txt", ("--reflow",), reflow),
    "big-paragraphs": (".txt", ("--reflow",), big_paragraph),
    "big-fences": (".md", (), big_fence),
    "big-tables": (".md", (), big_table),
}


def write_input(path: Path, size: int, piece: Callable[[random.Random], str]) -> None:
    """At least `size` bytes of pieces (and a line break after a last unended line)."""
    rng = random.Random(0)
    with path.open("w", encoding="utf-8") as handle:
        written, text = 0, ""
        while written < size:
            text = piece(rng)
            written += handle.write(text)
        if not text.endswith("\n"):
            handle.write("\n")


def peak_rss_mb(pid: int) -> float | None:
    """VmHWM of a running process, in MB (None once it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return None


def measure(
    probe: str,
    source: str | Path,
    out: Path,
    code: Path,
    env: dict[str, str],
    timeout: float,
    options: tuple[str, ...] = (),
) -> dict:
    """Run `probe` on `source` (a file, or a job) with command-line `options` in a fresh
    process; its peak RSS, time and last output line."""
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-c", REPORT_PEAK + probe, str(source), str(out), *options],
        cwd=code,
        env={**env, "PYTHONPATH": str(code)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    peak, timed_out, samples = 0.0, False, []
    while child.poll() is None:
        peak = max(peak, peak_rss_mb(child.pid) or 0.0)
        tree = [rss_mb(pid) for pid in process_tree(child.pid)]
        samples.append((time.perf_counter() - started, tree[0], sum(tree[1:])))
        if time.perf_counter() - started > timeout:
            child.kill()
            timed_out = True
        time.sleep(0.05)
    seconds = time.perf_counter() - started
    lines = child.stdout.read().strip().splitlines()
    reported = [int(line.split()[1]) / 1024 for line in lines if line.startswith("VmHWM ")]
    lines = [line for line in lines if not line.startswith("VmHWM ")] or ["(no output)"]
    result = f"unfinished after {timeout:.0f} s (killed)" if timed_out else lines[-1]
    return {
        "result": result,
        "rss": max([peak, *reported]),
        "seconds": seconds,
        "status": child.returncode,
        "samples": samples,  # every 50 ms: (seconds, VmRSS MB of the process, MB of its children)
    }


def main() -> None:
    """Write the inputs (once), start a redis-server, measure each input and command."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=50)
    parser.add_argument("--inputs", default="ordinary,one-line")
    parser.add_argument(
        "--commands", default="translate,submit", help="translate, submit, fetch (after submit), in order"
    )
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "bench-inputs")
    parser.add_argument("--code", type=Path, default=ROOT, help="checkout whose code is measured")
    parser.add_argument("--label", default="this checkout", help="what --code is, for the record")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--record", type=Path)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    server = RedisServer(Path(tempfile.mkdtemp(prefix="bench-inputs-redis-")))
    server.start()
    env = {**os.environ, "TRANSQUEUE_REDIS_URL": server.url, "TRANSQUEUE_QUEUE": "nobody"}
    rows = ["| input | command | result | peak RSS (MB) | seconds |", "| --- | --- | --- | --- | --- |"]
    try:
        for name in args.inputs.split(","):
            suffix, options, piece = KINDS[name]
            source = args.work / f"{name}-{args.size_mb}mb{suffix}"
            if not source.exists():
                write_input(source, args.size_mb * 1_000_000, piece)
            job = ""
            for command in args.commands.split(","):
                given = str(source)
                if command == "fetch":
                    subprocess.run(
                        [sys.executable, "-c", SETTLE, job],
                        cwd=args.code,
                        env={**env, "PYTHONPATH": str(args.code)},
                        check=True,
                    )
                    given = job
                with tempfile.TemporaryDirectory(prefix="bench-inputs-out-") as out:
                    given_options = () if command == "fetch" else options
                    run = measure(
                        PROBES[command], given, Path(out), args.code, env, args.timeout, given_options
                    )
                job = run["result"] if command == "submit" else job
                label = " ".join([source.name, *options])
                rows.append(
                    f"| {label} | {command} | {run['result']} (exit {run['status']}) "
                    f"| {run['rss']:.0f} | {run['seconds']:.1f} |"
                )
                print(rows[-1], flush=True)
    finally:
        server.kill()
    title = f"{args.size_mb} MB inputs, code of {args.label}"
    publish("\n".join(rows), args.record, title)


if __name__ == "__main__":
    main()
