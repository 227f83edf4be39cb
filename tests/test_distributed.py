"""The distributed path end to end: a real redis-server (AOF) and real `celery worker`s.

Every test compares the fetched outputs byte for byte with `transqueue translate`'s
in-process path (producer.pipeline over a Translator of the same tiny bundle), and checks
that each distinct sentence was settled exactly once.
"""

from __future__ import annotations

import dataclasses
import filecmp
import gzip
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from click.testing import CliRunner, Result
from conftest import tiny_pairs
from distributed_support import (
    CELERY_WORKER,
    ROOT,
    TRANSQUEUE_SCHEDULER,
    TRANSQUEUE_WORKER,
    RedisServer,
    Worker,
    wait_for,
)

from cli import main
from models.translator import Translator
from producer import defaults
from producer.documents import ReadOptions, output_path, parse_text
from producer.files import plan_files
from producer.inbox import deliver_job, run_inbox
from producer.pipeline import (
    RunOptions,
    RunReport,
    read_tasks,
    stream_units,
    translate_files,
    translate_stream,
)
from producer.schedule import CATCHUP_ENTRY, InboxEntry, load_schedule
from producer.scheduler import beat_config
from store.config import Settings
from store.jobstore import DONE, PARTIAL, JobInfo, JobStore
from store.keys import RUNNING_KEY, JobKeys
from store.queues import CATCHUP_TASK, TRANSLATE_TASK, client, model_key, model_queue, send_chunks
from store.runs import DELIVERED, FAILED, NOTHING_NEW, SKIPPED, SUBMITTED

pytestmark = pytest.mark.slow

POISON = "Zanzibar"  # the workers' TRANSQUEUE_TEST_POISON hook raises on sentences with it
SLEEPY = "Dormouse"  # ... and holds sentences with this for POISON_SLEEP seconds
ENGLISH = [en for en, _ in tiny_pairs()]
JOB_TIMEOUT = 240.0
#: A dead or stopped worker's chunk comes back after its lease (10 s), the grace (4 s) and a
#: sweep (2 s), then takes POISON_SLEEP (6 s): well inside this, far below the 3600 s
#: visibility timeout that used to be the only way back.
LEASE_DEADLINE = 60.0
FIELDS = ("text",)
TRANSQUEUE = (sys.executable, "-c", "from cli import main; main()")


@dataclass
class Cluster:
    """The module's redis-server and workers, and ways to talk to them."""

    redis: RedisServer
    env: dict[str, str]
    log_dir: Path
    workers: list[Worker]

    def settings(self, **changes: object) -> Settings:
        return dataclasses.replace(Settings.from_env(self.env), **changes)

    def store(self, **changes: object) -> JobStore:
        return JobStore.from_settings(self.settings(**changes), patience=60)

    def cli(
        self, *args: str, input: bytes | None = None, env: dict[str, str] | None = None, code: int = 0
    ) -> Result:
        result = CliRunner().invoke(main, list(args), input=input, env={**self.env, **(env or {})})
        assert result.exit_code == code, (result.output, result.exception)
        return result

    def add_worker(self, name: str, command: tuple[str, ...] = CELERY_WORKER, **env: str) -> Worker:
        worker = Worker(name, {**self.env, **env}, self.log_dir, command)
        self.workers.append(worker)
        return worker.start()

    def logs(self) -> str:
        return "\n".join(f"--- {w.name}\n{w.log_text()[-3000:]}" for w in self.workers)

    def wait_job(self, job_id: str, store: JobStore | None = None, timeout: float = 0.0) -> JobInfo:
        store = store or self.store()

        def finished() -> bool:
            info = store.info(job_id)
            return info is not None and info.finished

        wait_for(finished, f"job {job_id} to finish", timeout=timeout or JOB_TIMEOUT, detail=self.logs)
        return store.info(job_id)


@pytest.fixture(scope="module")
def cluster(tiny_bundle, tmp_path_factory):
    root = tmp_path_factory.mktemp("cluster")
    redis = RedisServer(root / "redis")
    redis.start()
    env = {
        "TRANSQUEUE_REDIS_URL": redis.url,
        "TRANSQUEUE_BUNDLE": str(tiny_bundle),
        "TRANSQUEUE_THREADS": "1",
        "TRANSQUEUE_CHUNK_SIZE": "4",
        "TRANSQUEUE_MAX_DELIVERIES": "3",
        "TRANSQUEUE_POLL_INTERVAL": "0.05",
        "TRANSQUEUE_TEST_POISON": f"raise:{POISON},sleep:{SLEEPY}",
    }
    cluster = Cluster(redis, env, root, [])
    try:
        cluster.add_worker("w1")
        cluster.add_worker("w2", TRANSQUEUE_WORKER)  # the same, started the other way
        yield cluster
    finally:
        for worker in cluster.workers:
            worker.kill()
        redis.kill()


@pytest.fixture(scope="module")
def translator(tiny_bundle):
    return Translator(tiny_bundle, threads=1)


def sentences(tag: str, count: int) -> list[str]:
    """`count` distinct sentences of this test (so that tests do not share memory hits)."""
    return [
        f"{tag.capitalize()} says {ENGLISH[i % len(ENGLISH)]}"
        if i < len(ENGLISH)
        else f"{tag.capitalize()} {i} says {ENGLISH[i % len(ENGLISH)]}"
        for i in range(count)
    ]


def write_corpus(directory: Path, tag: str, count: int) -> list[Path]:
    """A .txt (CRLF), a .md and a .jsonl sharing some sentences."""
    s = sentences(tag, count)
    third = count // 3
    directory.mkdir(parents=True)
    txt = directory / "notes.txt"
    lines = [f"{a} {b}" for a, b in zip(s[:third:2], s[1:third:2], strict=False)]
    txt.write_bytes(("\r\n".join([*lines, "", s[0]]) + "\r\n").encode())
    md = directory / "guide.md"
    md.write_text(
        f"# {s[third]}\n\n"
        + " ".join(s[third + 1 : 2 * third])
        + f"\n\n```\ncode stays {s[0]}\n```\n\n- {s[1]}\n",
        encoding="utf-8",
    )
    jsonl = directory / "records.jsonl"
    jsonl.write_text(
        "".join(
            json.dumps({"id": i, "text": text}, ensure_ascii=False) + "\n"
            for i, text in enumerate(s[2 * third :] + s[:3])
        ),
        encoding="utf-8",
    )
    return [txt, md, jsonl]


@dataclass(frozen=True)
class Untranslated:
    text: str
    hit_length_cap: bool = False


class KeepMarked:
    """The local reference for a job with dead letters: marked sentences stay in English."""

    def __init__(self, inner: Translator, marker: str) -> None:
        self.inner, self.marker = inner, marker

    def translate(self, sentences):
        for sentence in sentences:
            if self.marker in sentence:
                yield Untranslated(sentence)
            else:
                yield self.inner.translate_one(sentence)


def translate_locally(inputs: list[Path], out: Path, translator, options: ReadOptions) -> Path:
    """What `transqueue translate INPUTS --out OUT` writes (the in-process path)."""
    out.mkdir(parents=True, exist_ok=True)
    report = RunReport()
    documents = read_tasks(plan_files(inputs, out), RunOptions(read=options), report)
    translate_files(documents, translator, report)
    assert not report.errors
    return out


def assert_same_files(actual: Path, expected: Path) -> None:
    names = sorted(p.relative_to(expected) for p in expected.rglob("*") if p.is_file())
    assert names and sorted(p.relative_to(actual) for p in actual.rglob("*") if p.is_file()) == names
    match, mismatch, errors = filecmp.cmpfiles(expected, actual, [str(n) for n in names], shallow=False)
    assert (mismatch, errors) == ([], [])


def assert_settled_once(store: JobStore, info: JobInfo, dead: int = 0) -> None:
    """Every distinct sentence has exactly one result or dead letter, counted once."""
    keys = JobKeys(info.job_id)
    results, letters = store.client.hlen(keys.results), store.client.hlen(keys.dead)
    assert (results, letters) == (info.total - dead, dead)
    assert (info.done, info.dead) == (info.total - dead, dead)


def fetch_and_compare(
    cluster: Cluster,
    job_id: str,
    inputs: list[Path],
    tmp_path: Path,
    translator,
    out: str = "out",
    code: int = 0,
) -> Result:
    """`transqueue fetch JOB`, then compare with `transqueue translate` of the inputs."""
    fetched = cluster.cli("fetch", job_id, code=code)
    expected = translate_locally(inputs, tmp_path / "expected", translator, ReadOptions(FIELDS))
    assert_same_files(tmp_path / out, expected)
    return fetched


def submit_files(cluster: Cluster, inputs: list[Path], out: Path, **env: str) -> str:
    args = ["submit", *map(str, inputs), "--out", str(out), *sum((["--field", f] for f in FIELDS), [])]
    return cluster.cli(*args, env=env).output.strip()


def test_a_multi_file_job_across_two_workers(cluster, translator, tmp_path):
    inputs = write_corpus(tmp_path / "in", "multi", 90)
    job_id = submit_files(cluster, inputs, tmp_path / "out")
    store = cluster.store()
    info = cluster.wait_job(job_id)
    assert info.state == DONE and info.documents == 3
    assert info.total < info.segments  # repeated sentences were sent once
    cluster.cli("wait", job_id)
    fetched = fetch_and_compare(cluster, job_id, inputs, tmp_path, translator)
    assert "3 of 3 documents written" in fetched.output
    assert_settled_once(store, info)
    status = cluster.cli("status", job_id).output
    assert f"{info.total}/{info.total} distinct translated" in status and "done" in status
    assert job_id in cluster.cli("jobs").output
    for worker in cluster.workers[:2]:  # both took chunks
        assert f"{TRANSLATE_TASK}[" in worker.log_text()


def test_tables_and_compressed_files_come_back_as_translate_writes_them(cluster, translator, tmp_path):
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    said = sentences("tables", 12)
    rows = "id,text,n\r\n" + "".join(
        f'{i},"{a} {b}",{i}\r\n' for i, (a, b) in enumerate(zip(said, said[1:], strict=False))
    )
    (inbox / "rows.csv.gz").write_bytes(gzip.compress(rows.encode(), mtime=0))
    (inbox / "rows.tsv.zst").write_bytes(
        zstandard.ZstdCompressor().compress(rows.replace(",", "\t").encode())
    )
    records = "".join(json.dumps({"text": s}) + "\n" for s in said)
    (inbox / "records.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(records.encode()))
    args = ["submit", str(inbox), "--out", str(out), "--field", "text", "--column", "text"]
    job_id = cluster.cli(*args).output.strip()
    assert cluster.wait_job(job_id).state == DONE
    assert "3 of 3 documents written" in cluster.cli("fetch", job_id).output
    options = ReadOptions(fields=("text",), columns=("text",))
    assert_same_files(out, translate_locally([inbox], tmp_path / "expected", translator, options))


def test_the_translation_memory_serves_a_resubmitted_job(cluster, translator, tmp_path):
    inputs = write_corpus(tmp_path / "in", "memory", 30)
    store = cluster.store()
    first = cluster.wait_job(submit_files(cluster, inputs, tmp_path / "out1"))
    translated = store.stats()["translated"]
    second = cluster.wait_job(submit_files(cluster, inputs, tmp_path / "out2"))
    assert (first.hits, second.hits, second.total) == (0, first.total, first.total)
    assert store.stats()["translated"] == translated  # nothing was translated again
    assert_settled_once(store, second)
    fetch_and_compare(cluster, second.job_id, inputs, tmp_path, translator, out="out2")
    assert "cache hits   " + str(second.total) in cluster.cli("status", second.job_id).output


def test_protected_spans_markup_and_bom_come_back_as_translate_writes_them(cluster, translator, tmp_path):
    data = Path(__file__).parent / "data"
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "post.md").write_text((data / "jekyll_post.md").read_text())
    (inputs / "footer.txt").write_text("\ufeff" + (data / "gutenberg_footer.txt").read_text())
    (inputs / "tickets.txt").write_text("Ticket OPS-1234 is fixed. 你好，世界。\n")
    protect = r"\bOPS-\d+\b"
    job_id = cluster.cli("submit", str(inputs), "--out", str(tmp_path / "out"), "--protect", protect).output
    info = cluster.wait_job(job_id.strip())
    assert info.state == DONE and info.documents == 3
    cluster.cli("fetch", info.job_id)
    expected = translate_locally([inputs], tmp_path / "expected", translator, ReadOptions(protect=(protect,)))
    assert_same_files(tmp_path / "out", expected)
    assert " OPS-1234 " in (tmp_path / "out" / "tickets.txt").read_text()
    assert (tmp_path / "out" / "footer.txt").read_text().startswith("\ufeff")


def test_fetch_report_and_status_flag_as_translate_does(cluster, translator, tmp_path):
    """Quality flags of a job (first translated, then served from the memory) are those of
    `transqueue translate --report` on the same files: the workers keep the length-cap mark
    with each result, and the stored segments keep the segmenter's cuts for length."""
    inputs = write_corpus(tmp_path / "in", "flags", 30)
    long_line = " ".join(f"word{n}" for n in range(400)) + ". " + sentences("flags", 1)[0]
    inputs[0].write_bytes(inputs[0].read_bytes() + long_line.encode() + b"\r\n")
    local = tmp_path / "local.jsonl"
    args = ["translate", *map(str, inputs), "--out", str(tmp_path / "expected"), "--report", str(local)]
    translated = cluster.cli(*args, *sum((["--field", f] for f in FIELDS), []))
    expected = local.read_text()
    records = [json.loads(line) for line in expected.splitlines()]
    counts = translated.output.strip().rpartition("flagged: ")[2]
    assert {"length_cap", "split"} <= {flag for record in records for flag in record["flags"]}
    for out in ("out1", "out2"):  # the second job is served from the translation memory
        job_id = submit_files(cluster, inputs, tmp_path / out)
        cluster.wait_job(job_id)
        report = tmp_path / f"{out}.jsonl"
        fetched = cluster.cli("fetch", job_id, "--report", str(report))
        assert report.read_text() == expected
        assert fetched.output.strip().endswith(f"flagged: {counts}")
        status = cluster.cli("status", job_id).output
        flagged = len({record["path"] for record in records})  # of the 3 documents, all finished
        assert f"flags        {counts} (in {flagged} of 3 finished documents)" in status
    assert cluster.store().info(job_id).hits == cluster.store().info(job_id).total


def test_documents_of_several_windows_come_back_as_translate_writes_them(
    cluster, translator, tmp_path, monkeypatch
):
    """Files are submitted a window at a time (here 300 bytes) and fetched, followed and
    flagged window after window, exactly as `transqueue translate` writes them."""
    monkeypatch.setattr(defaults, "STREAM_WINDOW_BYTES", 300)
    inputs = write_corpus(tmp_path / "in", "windows", 90)
    expected_report = tmp_path / "expected.jsonl"
    args = [
        "translate",
        *map(str, inputs),
        "--out",
        str(tmp_path / "expected"),
        "--report",
        str(expected_report),
    ]
    cluster.cli(*args, *sum((["--field", f] for f in FIELDS), []))
    job_id = submit_files(cluster, inputs, tmp_path / "out")
    store = cluster.store()
    windows = {Path(r.name).name: r.windows for r in store.documents(job_id)}
    assert windows["guide.md"] > 1 and windows["notes.txt"] > 3 and windows["records.jsonl"] > 3
    report = tmp_path / "report.jsonl"
    followed = cluster.cli("fetch", job_id, "--follow", "--report", str(report))
    assert "3 of 3 documents written" in followed.output
    assert_same_files(tmp_path / "out", tmp_path / "expected")
    assert report.read_text() == expected_report.read_text()
    info = cluster.wait_job(job_id)
    assert info.total < info.segments  # sentences repeated across windows and documents: sent once
    assert_settled_once(store, info)

    inbox, outbox = tmp_path / "in", tmp_path / "outbox"  # and through an inbox, delivered
    entry = InboxEntry("windows", str(inbox), str(outbox), 60, fields=FIELDS, settle=0)
    run = run_inbox(store, entry)
    assert cluster.wait_job(run.job).hits == info.total  # all from the translation memory
    deliver_job(store, run.job, {"windows": entry})
    assert store.runs.get("windows", run.run_id).state == DELIVERED
    mirrored = translate_locally([inbox], tmp_path / "mirrored", translator, ReadOptions(FIELDS))
    assert_same_files(outbox, mirrored)


def blocks_corpus(directory: Path, tag: str, count: int) -> list[Path]:
    """A .md of every kind of block, blank lines inside fences, HTML, front matter and list
    items, and a hard-wrapped .txt of paragraphs, made of `count` sentences of this test."""
    s = sentences(tag, count)
    directory.mkdir(parents=True)
    md = directory / "guide.md"
    md.write_text(
        f"---\ntitle: {s[0]}\n\nlayout: post\n---\n\n# {s[1]}\n\n"
        + "".join(
            f"{s[i]} {s[i + 1]}\n{s[i + 2]}\n\n"
            f"```\ncode {s[i]}\n\nmore code\n```\n\n"
            f"- {s[i + 3]}\n\n    {s[i + 4]}\n\n- {s[i + 5]}\n\n"
            f"<!-- {s[i]}\n\n-->\n\n> {s[i + 6]}\n>\n> {s[i + 7]}\n\n"
            f"| {s[i + 8]} | {s[i + 9]} |\n|---|---|\n| {s[i + 1]} | 4 |\n\n"
            for i in range(2, count - 10, 10)
        ),
        encoding="utf-8",
    )
    txt = directory / "book.txt"
    txt.write_bytes(
        "".join(
            f"{s[i]}\r\n{s[i + 1]} {s[i + 2]}\r\n{s[i + 3]}\r\n\r\n" for i in range(0, count - 4, 4)
        ).encode()
    )
    return [md, txt]


def test_markdown_and_reflowed_text_of_several_windows_come_back_as_read_whole(
    cluster, translator, tmp_path, monkeypatch
):
    """A .md and a --reflow .txt, submitted a window at a time (here 200 bytes, cut after
    blank lines outside any block), come back byte for byte as the whole documents render
    with the same translations, and as `transqueue translate --reflow` writes them."""
    monkeypatch.setattr(defaults, "STREAM_WINDOW_BYTES", 200)
    inputs = blocks_corpus(tmp_path / "in", "blocks", 80)
    cluster.cli("translate", *map(str, inputs), "--out", str(tmp_path / "expected"), "--reflow")
    job_id = cluster.cli(
        "submit", *map(str, inputs), "--out", str(tmp_path / "out"), "--reflow"
    ).output.strip()
    windows = {Path(r.name).name: r.windows for r in cluster.store().documents(job_id)}
    assert windows["guide.md"] > 5 and windows["book.txt"] > 5
    cluster.wait_job(job_id)
    assert "2 of 2 documents written" in cluster.cli("fetch", job_id).output
    assert_same_files(tmp_path / "out", tmp_path / "expected")
    for path in inputs:
        whole = parse_text(path.read_bytes().decode(), path.suffix[1:], ReadOptions(reflow=True))
        translations = [translator.translate_one(segment.text).text for segment in whole.segments]
        assert (tmp_path / "out" / output_path(path).name).read_bytes() == whole.render(translations).encode()


def test_parquet_through_a_job_comes_back_as_translate_writes_it(cluster, translator, tmp_path):
    """A job stores a Parquet file's cells, not its table: fetch reads the file again, and
    only if it is unchanged (where it was submitted from, or a --source file)."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    said = sentences("parquet", 20)
    table = pa.table(
        {
            "id": pa.array(range(22), pa.int64()),
            "text": pa.array([*said, None, said[0]], pa.string()),
            "note": pa.array([f"Keep {i}." for i in range(22)], pa.large_string()),
        },
        metadata={b"origin": b"test"},
    )
    pq.write_table(table, inputs / "data.parquet", row_group_size=8, compression="zstd")
    out = tmp_path / "out"
    job_id = cluster.cli("submit", str(inputs / "data.parquet"), "--column", "text", "--out", str(out)).output
    info = cluster.wait_job(job_id.strip())
    assert (info.state, info.documents, info.total) == (DONE, 1, 20)
    assert cluster.store().documents(info.job_id)[0].windows == 3  # one a row group
    cluster.cli("fetch", info.job_id)
    options = ReadOptions(columns=("text",))
    expected = translate_locally([inputs / "data.parquet"], tmp_path / "expected", translator, options)
    assert_same_files(out, expected)
    assert pq.read_table(out / "data.zh.parquet").column("note") == table.column("note")

    moved = tmp_path / "elsewhere.parquet"
    (inputs / "data.parquet").rename(moved)
    failed = cluster.cli("fetch", info.job_id, "--out", str(tmp_path / "out2"), code=1)
    assert f"error: {inputs / 'data.parquet'}: the Parquet file it was read from" in failed.output
    assert "No such file or directory; pass that file with --source FILE" in failed.output
    assert "0 of 1 documents written" in failed.output and not (tmp_path / "out2").exists()
    cluster.cli("fetch", info.job_id, "--out", str(tmp_path / "out2"), "--source", str(moved))
    assert_same_files(tmp_path / "out2", expected)

    inbox, outbox = tmp_path / "inbox", tmp_path / "outbox"  # an inbox with columns
    inbox.mkdir()
    moved.rename(inbox / "data.parquet")
    entry = InboxEntry("tables", str(inbox), str(outbox), 60, columns=("text",), settle=0)
    run = run_inbox(cluster.store(), entry)
    assert cluster.wait_job(run.job).hits == 20
    deliver_job(cluster.store(), run.job, {"tables": entry})
    assert cluster.store().runs.get("tables", run.run_id).state == DELIVERED
    mirrored = translate_locally([inbox], tmp_path / "mirrored", translator, options)
    assert_same_files(outbox, mirrored)


def test_stdin_jsonl_comes_back_in_order_with_follow(cluster, translator):
    records = [{"id": i, "text": f"{s} {s.lower()}"} for i, s in enumerate(sentences("stream", 40))]
    data = "".join(json.dumps(r) + ("\r\n" if i % 2 else "\n") for i, r in enumerate(records)).encode()
    job_id = cluster.cli("submit", "-", "--field", "text", input=data).output.strip()
    followed = cluster.cli("fetch", job_id, "--follow")
    expected = "".join(
        translate_stream(
            stream_units(iter(data.splitlines(keepends=True))), "jsonl", translator, ReadOptions(FIELDS)
        )
    )
    assert followed.stdout_bytes == expected.encode()
    assert_settled_once(cluster.store(), cluster.wait_job(job_id))


def submit_sleepy(cluster: Cluster, tmp_path: Path, tag: str, count: int = 60) -> tuple[str, list[Path]]:
    """A job with one sentence that the workers hold for POISON_SLEEP seconds.

    The sentence names `tag`: a sentence an earlier test translated would be a hit in the
    translation memory, settled without reaching the model (and its sleep)."""
    inputs = write_corpus(tmp_path / "in", tag, count)
    with inputs[0].open("ab") as txt:
        txt.write(f"The {SLEEPY} sleeps in the {tag} teapot.\r\n".encode())
    return submit_files(cluster, inputs, tmp_path / "out"), inputs


def holder_of_sleepy_chunk(cluster: Cluster, store: JobStore, job_id: str) -> tuple[Worker, str]:
    """The worker translating the job's sleepy chunk right now, and its tq:running field."""
    found: list[tuple[Worker, str]] = []

    def running() -> bool:
        for field, entry in store.client.hgetall(RUNNING_KEY).items():
            run = json.loads(entry)
            if field.startswith(job_id) and any(SLEEPY in text for _, text in run["items"]):
                pid = int(run["worker"].split(":")[1])  # host:pid:life
                found.extend((w, field) for w in cluster.workers if w.process and w.process.pid == pid)
                return bool(found)
        return False

    wait_for(running, "a worker to take the sleepy chunk", interval=0.05, detail=cluster.logs)
    return found[0]


def replace_worker(cluster: Cluster, victim: Worker, name: str) -> None:
    """Keep two workers for the tests that follow."""
    cluster.workers.remove(victim)
    cluster.add_worker(name)


def test_a_worker_killed_mid_chunk_loses_its_lease_and_the_chunk_is_requeued(cluster, translator, tmp_path):
    job_id, inputs = submit_sleepy(cluster, tmp_path, "killed")
    store = cluster.store()
    victim, field = holder_of_sleepy_chunk(cluster, store, job_id)
    victim.kill()  # kill -9 mid-chunk; the visibility timeout (3600 s) is not what saves it
    info = cluster.wait_job(job_id, timeout=LEASE_DEADLINE)
    assert info.state == DONE
    chunk = field.rpartition(":")[2]
    assert store.client.hget(JobKeys(job_id).strikes, chunk) == "1"  # the loss, counted once
    assert "was lost with worker" in cluster.logs()
    assert_settled_once(store, info)
    fetch_and_compare(cluster, job_id, inputs, tmp_path, translator)
    replace_worker(cluster, victim, "w3")


def test_a_stopped_worker_s_chunk_is_finished_by_another_and_its_wake_changes_nothing(
    cluster, translator, tmp_path
):
    job_id, inputs = submit_sleepy(cluster, tmp_path, "stopped")
    store = cluster.store()
    victim, _ = holder_of_sleepy_chunk(cluster, store, job_id)
    os.killpg(victim.process.pid, signal.SIGSTOP)
    try:
        info = cluster.wait_job(job_id, timeout=LEASE_DEADLINE)
    finally:
        os.killpg(victim.process.pid, signal.SIGCONT)
    assert info.state == DONE
    results = store.client.hgetall(JobKeys(job_id).results)
    wait_for(
        lambda: not store.client.hgetall(RUNNING_KEY),
        "the woken worker to end its run",
        timeout=60,
        detail=cluster.logs,
    )
    assert store.client.hgetall(JobKeys(job_id).results) == results
    assert_settled_once(store, store.info(job_id))
    fetch_and_compare(cluster, job_id, inputs, tmp_path, translator)


def test_a_small_job_is_not_starved_by_a_big_one(cluster, tmp_path):
    big = submit_files(cluster, write_corpus(tmp_path / "big", "big", 600), tmp_path / "big-out")
    small = submit_files(cluster, write_corpus(tmp_path / "small", "small", 12), tmp_path / "small-out")
    small_info, big_info = cluster.wait_job(small), cluster.wait_job(big)
    assert big_info.chunks > 100 and small_info.chunks <= 3
    assert small_info.finished_at < big_info.finished_at


def test_a_redis_restart_mid_job_while_a_client_waits(cluster, translator, tmp_path):
    job_id, inputs = submit_sleepy(cluster, tmp_path, "restart", 300)
    store = cluster.store()
    wait_for(lambda: store.info(job_id).done >= 20, "the job to get going", interval=0.01)
    waiter = subprocess.Popen(
        [*TRANSQUEUE, "wait", job_id],
        cwd=ROOT,
        env={**os.environ, **cluster.env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # its first progress line says it has read the job and is polling (not a sleep's guess)
    first = waiter.stderr.readline()
    assert first.startswith(f"{job_id}: "), first
    cluster.redis.kill()
    time.sleep(2)  # Redis stays down a while: the waiter must notice and say so once
    cluster.redis.start()  # same port and directory: the AOF brings everything back
    info = cluster.wait_job(job_id, store)
    _, err = waiter.communicate(timeout=JOB_TIMEOUT)
    assert waiter.returncode == 0, err
    assert err.count("Redis unreachable, retrying") == 1 and "Traceback" not in err
    assert info.state == DONE
    assert_settled_once(store, info)
    fetch_and_compare(cluster, job_id, inputs, tmp_path, translator)


def test_a_poison_sentence_lands_in_dead_letters(cluster, translator, tmp_path):
    inputs = write_corpus(tmp_path / "in", "poison", 30)
    with inputs[0].open("ab") as txt:
        txt.write(f"A {POISON} sentence. Fine after it.\r\nAgain a {POISON} sentence.\r\n".encode())
    job_id = submit_files(cluster, inputs, tmp_path / "out")
    store = cluster.store()
    info = cluster.wait_job(job_id)
    assert (info.state, info.dead) == (PARTIAL, 2)
    assert_settled_once(store, info, dead=2)
    status = cluster.cli("status", job_id).output
    assert "dead letters 2" in status and "PoisonError" in status
    fetched = fetch_and_compare(cluster, job_id, inputs, tmp_path, KeepMarked(translator, POISON), code=1)
    assert "left untranslated" in fetched.output and POISON in fetched.output

    # A chunk of a job that does not exist is set aside too.
    settings = cluster.settings()
    send_chunks(
        settings, "no-such-job", [(0, [(0, "Hello.")])], 1, model_queue(settings, model_key(settings))
    )
    wait_for(
        lambda: any(o["job"] == "no-such-job" for o in store.orphans()),
        "the orphan chunk to be recorded",
        detail=cluster.logs,
    )


def test_a_sentence_that_kills_its_worker_is_given_up_after_the_cap(cluster, translator, tmp_path):
    queue = {"TRANSQUEUE_QUEUE": "crashes", "TRANSQUEUE_MAX_DELIVERIES": "2"}
    # prefork respawns the dead pool process at once, as a supervisor (compose restart,
    # systemd) restarts a dead solo worker; the delivery cap is the same for every pool.
    cluster.add_worker("crasher", TRANSQUEUE_TEST_POISON="exit:Kaboom", TRANSQUEUE_POOL="prefork", **queue)
    inputs = write_corpus(tmp_path / "in", "crash", 24)
    with inputs[0].open("ab") as txt:
        txt.write(b"Kaboom goes the sentence. The next one is fine.\r\n")
    job_id = submit_files(cluster, inputs, tmp_path / "out", **queue)
    store = cluster.store()
    info = cluster.wait_job(job_id)
    assert (info.state, info.dead) == (PARTIAL, 1)
    (letter,) = store.dead_letters(job_id).values()
    assert letter.text == "Kaboom goes the sentence." and letter.deliveries == 3
    assert_settled_once(store, info, dead=1)
    fetch_and_compare(cluster, job_id, inputs, tmp_path, KeepMarked(translator, "Kaboom"), code=1)


def test_an_inbox_run_from_its_beat_entry(cluster, translator, tmp_path):
    inbox, outbox = tmp_path / "inbox", tmp_path / "outbox"
    inputs = write_corpus(inbox, "inbox", 30)
    schedule = tmp_path / "schedule.json"
    schedule.write_text(
        json.dumps(
            {
                "inbox": [
                    {
                        "name": "docs",
                        "inbox": str(inbox),
                        "outbox": str(outbox),
                        "schedule": "*/5 * * * *",
                        "fields": list(FIELDS),
                        "settle": 0,  # its files are written just before each scan
                    }
                ]
            }
        ),
        encoding="utf-8",
    )
    beat = beat_config(cluster.settings(schedule=str(schedule)))["beat_schedule"]["inbox:docs"]
    store = cluster.store()
    # Consumes the inbox queue; the inbox's directories come from its own schedule file.
    cluster.add_worker("scheduler", TRANSQUEUE_SCHEDULER, TRANSQUEUE_SCHEDULE=str(schedule))

    def beat_tick() -> None:  # what celery beat sends at each tick (routed to the inbox queue)
        with client.connection_for_write(cluster.redis.url) as connection:
            client.send_task(beat["task"], args=beat["args"], connection=connection)

    def runs_settle(count: int) -> list:
        def settled() -> bool:
            runs = store.runs.list("docs")
            return len(runs) == count and runs[-1].state not in (SUBMITTED,)

        wait_for(settled, f"inbox run {count}", timeout=JOB_TIMEOUT, detail=cluster.logs)
        return store.runs.list("docs")

    beat_tick()
    first = runs_settle(1)[-1]
    assert first.state == DELIVERED and sorted(first.files) == sorted(p.name for p in inputs)
    expected = translate_locally([inbox], tmp_path / "expected", translator, ReadOptions(FIELDS))
    assert_same_files(outbox, expected)

    beat_tick()
    assert runs_settle(2)[-1].state == NOTHING_NEW

    changed = inputs[1]
    changed.write_text(changed.read_text(encoding="utf-8") + "\nOne more sentence here.\n", encoding="utf-8")
    beat_tick()
    third = runs_settle(3)[-1]
    assert third.state == DELIVERED
    (digest,) = third.files.values()  # the file's sha256, then the entry's settings' hash
    assert list(third.files) == [changed.name]
    assert digest.partition(":")[0] == hashlib.sha256(changed.read_bytes()).hexdigest()
    expected = translate_locally([inbox], tmp_path / "expected2", translator, ReadOptions(FIELDS))
    assert_same_files(outbox, expected)

    lock = store.client.lock("tq:inbox:docs:lock", timeout=60)
    assert lock.acquire(blocking=False)
    try:
        assert run_inbox(store, load_schedule(schedule)[0]).state == SKIPPED
    finally:
        lock.release()
    listing = cluster.cli("runs", "docs").output
    states = [line.split("  ")[2].strip() for line in listing.splitlines()]
    assert states.count(DELIVERED) == 2 and NOTHING_NEW in states and SKIPPED in states
    assert "  submitted=1  delivered=1  " in listing  # the changed file's run

    missing = InboxEntry("gone", str(tmp_path / "nowhere"), str(outbox), 60)
    failed = run_inbox(store, missing)
    assert failed.state == FAILED and "nowhere: no such file or directory" in failed.message


def test_a_finished_inbox_job_whose_delivery_was_lost_is_delivered_by_the_catch_up(
    cluster, translator, tmp_path
):
    inbox, outbox = tmp_path / "inbox", tmp_path / "outbox"
    write_corpus(inbox, "catchup", 24)
    schedule = tmp_path / "schedule.json"
    entry = {"name": "daily", "inbox": str(inbox), "outbox": str(outbox), "schedule": "0 3 * * *"}
    entry |= {"fields": list(FIELDS), "settle": 0}
    schedule.write_text(json.dumps({"inbox": [entry]}), encoding="utf-8")
    beat = beat_config(cluster.settings(schedule=str(schedule)))["beat_schedule"]
    # A scheduler on an inbox queue of its own: the deliver task that the worker finishing the
    # job sends goes to the usual one, and never reaches it, as if Redis had lost it.
    queue = "transqueue.inbox.catchup"
    env = {"TRANSQUEUE_SCHEDULE": str(schedule), "TRANSQUEUE_INBOX_QUEUE": queue}
    scheduler = cluster.add_worker("catchup-scheduler", TRANSQUEUE_SCHEDULER, **env)
    store = cluster.store()

    def beat_tick(name: str) -> None:
        with client.connection_for_write(cluster.redis.url) as connection:
            client.send_task(beat[name]["task"], args=beat[name]["args"], connection=connection, queue=queue)

    def catch_ups() -> int:
        return len(re.findall(rf"Task {re.escape(CATCHUP_TASK)}\[[^\]]+\] succeeded", scheduler.log_text()))

    try:
        beat_tick("inbox:daily")
        wait_for(lambda: store.runs.list("daily"), "the scan", timeout=JOB_TIMEOUT, detail=cluster.logs)
        (run,) = store.runs.list("daily")
        assert run.state == SUBMITTED
        cluster.wait_job(run.job)
        assert store.runs.get("daily", run.run_id).state == SUBMITTED  # no delivery came

        beat_tick(CATCHUP_ENTRY)  # the next entry's run is a day away: the catch-up delivers it
        wait_for(
            lambda: store.runs.get("daily", run.run_id).state == DELIVERED,
            "the catch-up to deliver the job",
            timeout=JOB_TIMEOUT,
            detail=cluster.logs,
        )
        (delivered,) = store.runs.list("daily")  # no scan ran
        expected = translate_locally([inbox], tmp_path / "expected", translator, ReadOptions(FIELDS))
        assert_same_files(outbox, expected)

        written = {path: path.stat().st_mtime_ns for path in outbox.rglob("*")}
        beat_tick(CATCHUP_ENTRY)  # nothing left to deliver: nothing written, no run changed
        wait_for(lambda: catch_ups() == 2, "the second catch-up", timeout=60, detail=cluster.logs)
        assert store.runs.list("daily") == [delivered]
        assert {path: path.stat().st_mtime_ns for path in outbox.rglob("*")} == written
    finally:
        scheduler.kill()
