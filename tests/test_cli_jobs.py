"""cli.jobs: the job commands against a real redis-server (no workers needed)."""

from __future__ import annotations

import errno
import io
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli import main
from cli.common import EXIT_REDIS
from store.config import Settings
from store.jobstore import DeadLetter, DocumentRecord, JobStore, NewJob, WindowRecord
from store.keys import JobKeys
from store.queues import send_chunks

pytest_plugins = ["distributed_support"]

TRANSQUEUE = Path(sys.executable).with_name("transqueue")


def test_fetch_refuses_to_overwrite_the_inputs(redis_server, tmp_path, monkeypatch):
    redis_server.client().flushdb()
    env = {"TRANSQUEUE_REDIS_URL": redis_server.url}
    source = tmp_path / "in" / "a.txt"
    source.parent.mkdir()
    source.write_bytes(b"Hello there.\n")
    monkeypatch.chdir(tmp_path)  # submit names the input relatively
    submitted = CliRunner().invoke(main, ["submit", "in", "--out", "out"], env=env)
    assert submitted.exit_code == 0, submitted.output
    job_id = submitted.output.strip()
    store = JobStore.from_settings(Settings(redis_url=redis_server.url))
    store.record(job_id, 0, "Hello there.", "你好。", fingerprint="f", hit=False)
    (record,) = store.documents(job_id)
    assert record.name == str(source) and record.target == "a.txt"

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # fetch runs from another directory
    fetched = CliRunner().invoke(main, ["fetch", job_id, "--out", os.path.join("..", "in")], env=env)
    assert fetched.exit_code == 1
    assert f"refusing to overwrite input {source}" in fetched.output
    assert source.read_bytes() == b"Hello there.\n"

    fetched = CliRunner().invoke(main, ["fetch", job_id], env=env)
    assert fetched.exit_code == 0, fetched.output
    assert (tmp_path / "out" / "a.txt").read_text(encoding="utf-8") == "你好。\n"


def finished_job(store: JobStore, target: str) -> str:
    """A finished one-document job whose stored target is `target`."""
    writer = store.writer("tampered")
    writer.document(0, DocumentRecord("/in/a.txt", "txt", target=target))
    writer.window(0, 0, WindowRecord(()), '{"segments": [], "parts": []}')
    writer.flush()
    store.create(
        NewJob(
            job_id="tampered",
            documents=1,
            segments=0,
            total=1,
            chunks=1,
            out="",
            origin="files",
        )
    )
    store.record("tampered", 0, "Hello.", "你好。", fingerprint="f", hit=False)
    return "tampered"


@pytest.mark.parametrize("target", ["../x.txt", "sub/../../x.txt", "/tmp/transqueue-escaped.txt", ""])
def test_fetch_never_writes_outside_out(redis_server, tmp_path, target):
    redis_server.client().flushdb()
    store = JobStore.from_settings(Settings(redis_url=redis_server.url))
    job_id = finished_job(store, target)
    out = tmp_path / "out"
    fetched = CliRunner().invoke(
        main, ["fetch", job_id, "--out", str(out)], env={"TRANSQUEUE_REDIS_URL": redis_server.url}
    )
    assert fetched.exit_code == 1
    assert "refusing to write outside" in fetched.output and "Traceback" not in fetched.output
    assert not (tmp_path / "x.txt").exists() and not os.path.exists("/tmp/transqueue-escaped.txt")
    assert not out.exists() or not any(out.iterdir())


def test_fetch_refuses_a_symlink_out_of_out(redis_server, tmp_path):
    redis_server.client().flushdb()
    store = JobStore.from_settings(Settings(redis_url=redis_server.url))
    job_id = finished_job(store, "link/a.txt")
    out, outside = tmp_path / "out", tmp_path / "outside"
    out.mkdir()
    outside.mkdir()
    (out / "link").symlink_to(outside)
    fetched = CliRunner().invoke(
        main, ["fetch", job_id, "--out", str(out)], env={"TRANSQUEUE_REDIS_URL": redis_server.url}
    )
    assert fetched.exit_code == 1 and "a symbolic link leads out of it" in fetched.output
    assert not any(outside.iterdir())


def test_a_bad_job_id_or_a_corrupt_job_is_one_line(redis_server):
    redis_server.client().flushdb()
    env = {"TRANSQUEUE_REDIS_URL": redis_server.url}
    for command in ("status", "wait", "fetch", "cancel"):
        result = CliRunner().invoke(main, [command, "abc:docs"], env=env)
        assert result.exit_code == 1 and "job id 'abc:docs' is not valid" in result.output
    redis_server.client().set(JobKeys("junk").meta, "x")
    result = CliRunner().invoke(main, ["status", "junk"], env=env)
    assert result.exit_code == 1 and "tq:job:junk does not hold a job" in result.output


def test_a_database_redis_refuses_is_not_called_a_corrupt_job(redis_server):
    out_of_range = redis_server.url.rsplit("/", 1)[0] + "/99"
    for command in ("status", "wait", "fetch", "cancel"):
        result = CliRunner().invoke(main, [command, "abc"], env={"TRANSQUEUE_REDIS_URL": out_of_range})
        assert result.exit_code == EXIT_REDIS and "DB index is out of range" in result.output, result.output
        assert "does not hold a job" not in result.output and "Traceback" not in result.output
        assert result.output.startswith("Error: cannot reach Redis at redis://")


@pytest.mark.parametrize(
    ("password", "message"),
    [("", "authentication failed (no password in TRANSQUEUE_REDIS_URL)"), ("wrong", "(wrong password?)")],
)
def test_redis_refusing_the_credentials_is_one_line_and_exit_3(tmp_path, password, message):
    from distributed_support import RedisServer

    server = RedisServer(tmp_path / "redis", password="right")
    server.start()
    try:
        url = f"redis://:{password}@127.0.0.1:{server.port}/0" if password else server.url_without_password
        source = tmp_path / "a.txt"
        source.write_text("Hello.\n", encoding="utf-8")
        for args in (["status", "abc"], ["jobs"], ["submit", str(source), "--out", str(tmp_path / "o")]):
            result = CliRunner().invoke(main, args, env={"TRANSQUEUE_REDIS_URL": url})
            assert result.exit_code == EXIT_REDIS, result.output
            (line,) = result.output.strip().splitlines()
            assert line.startswith("Error: cannot reach Redis at redis://") and message in line
            assert "right" not in line and (not password or ":***@" in line)
    finally:
        server.kill()


def test_long_running_commands_refuse_a_wrong_password_at_once(tmp_path):
    # Celery would retry a refused password forever; Redis being down is waited out instead
    from distributed_support import RedisServer

    server = RedisServer(tmp_path / "redis", password="right")
    server.start()
    try:
        env = {**os.environ, "TRANSQUEUE_REDIS_URL": f"redis://:wrong@127.0.0.1:{server.port}/0"}
        for args in (["worker", "--pool", "solo"], ["scheduler"], ["metrics", "--port", "1"]):
            done = subprocess.run([TRANSQUEUE, *args], env=env, capture_output=True, text=True, timeout=120)
            assert done.returncode == EXIT_REDIS, (args, done.stderr[-2000:])
            assert "authentication failed (wrong password?)" in done.stderr.strip().splitlines()[-1]
        out_of_range = f"redis://:right@127.0.0.1:{server.port}/99"
        result = CliRunner().invoke(main, ["jobs"], env={"TRANSQUEUE_REDIS_URL": out_of_range})
        assert result.exit_code == EXIT_REDIS and "DB index is out of range" in result.output
        assert "Traceback" not in result.output and "right" not in result.output
    finally:
        server.kill()


def test_redis_not_listening_is_retried_for_the_patience_then_exit_3(tmp_path):
    from distributed_support import free_port

    url = f"redis://127.0.0.1:{free_port()}/0"
    env = {"TRANSQUEUE_REDIS_URL": url, "TRANSQUEUE_CLIENT_PATIENCE": "1"}
    result = CliRunner().invoke(main, ["jobs"], env=env)
    assert result.exit_code == EXIT_REDIS
    retrying, error = result.output.strip().splitlines()
    assert retrying.startswith("Redis unreachable, retrying for up to 1 s")
    assert error.startswith(f"Error: cannot reach Redis at {url}: ") and "Connection refused" in error


def unfinished_job(
    redis_server, tmp_path, source: Path | None = None
) -> tuple[JobStore, str, dict[str, str]]:
    """A submitted job that no worker takes (its queue has no consumer): of `source`, by
    default one file of two sentences."""
    redis_server.client().flushdb()
    env = {
        "TRANSQUEUE_REDIS_URL": redis_server.url,
        "TRANSQUEUE_QUEUE": "nobody",
        "TRANSQUEUE_POLL_INTERVAL": "0.05",
    }
    if source is None:
        source = tmp_path / "a.txt"
        source.write_text("Hello there.\nGood night.\n", encoding="utf-8")
    submitted = CliRunner().invoke(main, ["submit", str(source), "--out", str(tmp_path / "out")], env=env)
    assert submitted.exit_code == 0, submitted.output
    return JobStore.from_settings(Settings(redis_url=redis_server.url)), submitted.output.strip(), env


def test_fetch_follow_of_a_job_cancelled_part_way_says_what_it_wrote(redis_server, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("Hello there.\n", encoding="utf-8")
    (corpus / "b.txt").write_text("Good night.\n", encoding="utf-8")
    store, job_id, env = unfinished_job(redis_server, tmp_path, corpus)
    store.record(job_id, 0, "Hello there.", "你好。", fingerprint="f", hit=False)  # a.txt done
    cancel = threading.Timer(1.0, store.cancel, args=[job_id])
    cancel.start()
    try:
        fetched = CliRunner().invoke(main, ["fetch", job_id, "--follow"], env=env)
    finally:
        cancel.cancel()
    assert fetched.exit_code == 1 and f"job {job_id} was cancelled" in fetched.output
    assert f"1 of 2 documents written to {tmp_path / 'out'}" in fetched.output
    assert (tmp_path / "out" / "a.txt").read_text(encoding="utf-8") == "你好。\n"


def test_fetch_of_an_unfinished_or_cancelled_job_exits_1(redis_server, tmp_path):
    store, job_id, env = unfinished_job(redis_server, tmp_path)
    fetched = CliRunner().invoke(main, ["fetch", job_id], env=env)
    assert fetched.exit_code == 1 and "not finished yet" in fetched.output
    assert CliRunner().invoke(main, ["cancel", job_id], env=env).exit_code == 0
    status = CliRunner().invoke(main, ["status", job_id], env=env).output
    assert "state        cancelled" in status and "ETA          none (cancelled)" in status
    fetched = CliRunner().invoke(main, ["fetch", job_id], env=env)
    assert fetched.exit_code == 1 and "is cancelled: the other documents are not finished\n" in fetched.output


def wait_for_a_job_cancelled_later(store: JobStore, job_id: str, env: dict[str, str], monkeypatch):
    """`transqueue wait JOB`'s result, the job cancelled well after the no-worker hints are
    due (0.3 s), so that a loaded machine still gets there."""
    from store import defaults

    monkeypatch.setattr(defaults, "NO_WORKER_HINT_AFTER", 0.3)
    cancel = threading.Timer(4.0, store.cancel, args=[job_id])
    cancel.start()
    try:
        return CliRunner().invoke(main, ["wait", job_id], env=env)
    finally:
        cancel.cancel()  # a failed wait leaves no timer to fire into a later test


def test_wait_says_when_no_worker_takes_the_job(redis_server, tmp_path, monkeypatch):
    store, job_id, env = unfinished_job(redis_server, tmp_path)
    waited = wait_for_a_job_cancelled_later(store, job_id, env, monkeypatch)
    assert waited.exit_code == 1 and f"job {job_id} was cancelled" in waited.output
    assert waited.output.count("no worker has taken a chunk") == 1
    queue = store.info(job_id).queue  # the job's model's queue, the one a worker must consume
    hint = next(line for line in waited.output.splitlines() if "no worker has taken a chunk" in line)
    assert queue.startswith("nobody.") and f"queue '{queue}'" in hint
    assert "celery -A worker inspect active_queues" in waited.output


def test_ctrl_c_stops_wait_with_status_130(redis_server, tmp_path):
    """Click reported it as "Aborted!" and exit status 1, a failure; every command stops on
    Ctrl-C with 128 + SIGINT, as translate and fetch do (`cli.common.TransqueueGroup`)."""
    import signal
    import time

    _, job_id, env = unfinished_job(redis_server, tmp_path)
    waiting = subprocess.Popen(
        [sys.executable, "-c", "from cli import main; main()", "wait", job_id],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(2.0)  # imported and polling (the job never finishes)
        assert waiting.poll() is None, waiting.communicate()
        waiting.send_signal(signal.SIGINT)
        _, stderr = waiting.communicate(timeout=30)
    finally:
        waiting.kill()
    assert waiting.returncode == 130, stderr
    assert "Aborted" not in stderr and "Traceback" not in stderr


def test_wait_exits_1_if_sentences_ended_in_dead_letters(redis_server, tmp_path):
    store, job_id, env = unfinished_job(redis_server, tmp_path)
    store.record(job_id, 0, "Hello there.", "你好。", fingerprint="f", hit=False)
    letter = DeadLetter(slot=1, text="Good night.", reason="boom", chunk=0, deliveries=3, at=0.0)
    assert store.dead_letter(job_id, letter).finalized
    waited = CliRunner().invoke(main, ["wait", "--quiet", job_id], env=env)
    assert waited.exit_code == 1, waited.output
    assert f"job {job_id} finished with 1 dead letters; see `transqueue status {job_id}`" in waited.output

    store, job_id, env = unfinished_job(redis_server, tmp_path)  # the same job, translated whole
    store.record(job_id, 0, "Hello there.", "你好。", fingerprint="f", hit=False)
    assert store.record(job_id, 1, "Good night.", "晚安。", fingerprint="f", hit=False).finalized
    waited = CliRunner().invoke(main, ["wait", "--quiet", job_id], env=env)
    assert waited.exit_code == 0 and waited.output == "", waited.output


def test_status_shows_each_dead_letter_reason_once(redis_server, tmp_path):
    store, job_id, env = unfinished_job(redis_server, tmp_path)
    for slot in range(2):
        letter = DeadLetter(
            slot=slot, text=f"s{slot}", reason="BundleError('gone')", chunk=0, deliveries=3, at=0.0
        )
        store.dead_letter(job_id, letter)
    status = CliRunner().invoke(main, ["status", job_id], env=env).output
    assert status.count("BundleError('gone')") == 1 and "  2 sentences: BundleError('gone')" in status
    lines = status.splitlines()  # listed under their line, not under the flags line below it
    dead = lines.index("dead letters 2")
    assert lines[dead + 1] == "  2 sentences: BundleError('gone')"
    assert lines[dead + 2] == "    sentence 0 (chunk 0, delivery 3): 's0'"
    assert lines.index(next(line for line in lines if line.startswith("flags "))) > dead + 3


def test_chunks_show_a_summary_not_their_sentences(redis_server):
    redis_server.client().flushdb()
    settings = Settings(redis_url=redis_server.url, queue="argsrepr-test")
    send_chunks(settings, "j1", [(0, [(0, "A secret sentence.")])], 1)
    (raw,) = redis_server.client().lrange("argsrepr-test", 0, -1)
    headers = json.loads(raw)["headers"]
    assert headers["argsrepr"] == "job=j1 chunk=0 sentences=1"


def test_a_job_asks_for_its_model_and_says_when_no_worker_serves_it(redis_server, tmp_path, tiny_bundle):
    from store.leases import current_worker
    from store.queues import model_key

    redis_server.client().flushdb()
    env = {"TRANSQUEUE_REDIS_URL": redis_server.url, "TRANSQUEUE_POLL_INTERVAL": "0.05"}
    source = tmp_path / "a.txt"
    source.write_text("Hello there.\n", encoding="utf-8")
    args = ["submit", str(source), "--out", str(tmp_path / "out"), "--model", str(tiny_bundle)]
    job_id = CliRunner().invoke(main, args, env=env).output.strip()
    store = JobStore.from_settings(Settings(redis_url=redis_server.url))
    info = store.info(job_id)
    key = model_key(Settings(bundle=str(tiny_bundle)))
    assert (info.model, info.queue) == (key, f"transqueue.{key}") and key != model_key(Settings())
    assert redis_server.client().llen(f"transqueue.{key}") == 1  # waiting on its model's queue
    status = CliRunner().invoke(main, ["status", job_id], env=env).output
    assert f"model        {key} (0 workers serving it)" in status
    cancel = threading.Timer(3.0, store.cancel, args=[job_id])  # ends the wait once it has said so
    cancel.start()
    try:
        waited = CliRunner().invoke(main, ["wait", job_id], env=env)
    finally:
        cancel.cancel()
    assert waited.output.count(f"waiting for a worker serving model {key} (queue 'transqueue.{key}')") == 1
    store.announce(current_worker(), f"transqueue.{key}", 60)  # as each worker's sweeper does
    status = CliRunner().invoke(main, ["status", job_id], env=env).output
    assert f"model        {key} (1 worker serving it)" in status
    store.announce("elsewhere:7", f"transqueue.{key}", 60)
    store.announce("other-model:8", f"transqueue.{model_key(Settings())}", 60)
    status = CliRunner().invoke(main, ["status", job_id], env=env).output
    assert f"model        {key} (2 workers serving it)" in status
    bad = CliRunner().invoke(main, [*args[:-1], str(tmp_path)], env=env)
    assert bad.exit_code == 1 and "--model: " in bad.output and "not a transqueue model bundle" in bad.output


def test_a_bad_transqueue_bundle_is_named_by_submit_not_model(tmp_path):
    source = tmp_path / "a.txt"
    source.write_text("Hello there.\n", encoding="utf-8")
    env = {"TRANSQUEUE_REDIS_URL": "redis://localhost:1/0", "TRANSQUEUE_BUNDLE": str(tmp_path)}
    args = ["submit", str(source), "--out", str(tmp_path / "out")]
    bad = CliRunner().invoke(main, args, env=env)  # fails before Redis is reached
    assert bad.exit_code == 1 and "Error: --model" not in bad.output
    assert bad.output.startswith(f"Error: TRANSQUEUE_BUNDLE={str(tmp_path)!r}: ")
    assert "not a transqueue model bundle" in bad.output and len(bad.output.splitlines()) == 1


def test_submit_model_key_needs_no_bundle_here(redis_server, tmp_path):
    """A submitting machine that shares the workers' settings, whose TRANSQUEUE_BUNDLE names
    a path only the workers have: the job names its model, its sentences are chunked by
    characters, as for any model whose tokenizer is not here."""
    redis_server.client().flushdb()
    source = tmp_path / "a.txt"
    source.write_text("Hello there.\n", encoding="utf-8")
    env = {"TRANSQUEUE_REDIS_URL": redis_server.url, "TRANSQUEUE_BUNDLE": str(tmp_path / "workers-only")}
    args = ["submit", str(source), "--out", str(tmp_path / "out"), "--model", "0123456789ab"]
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == 0, result.output
    store = JobStore.from_settings(Settings(redis_url=redis_server.url))
    assert store.info(result.output.strip()).model == "0123456789ab"


def test_submit_warns_of_a_jsonl_file_with_no_text_in_its_field(redis_server, tmp_path):
    """As translate warns: a misspelt --field submitted the records to pass through, silently."""
    redis_server.client().flushdb()
    source = tmp_path / "corpus.jsonl"
    source.write_text('{"id": 1, "text": "Hello."}\n', encoding="utf-8")
    env = {"TRANSQUEUE_REDIS_URL": redis_server.url}
    args = ["submit", str(source), "--out", str(tmp_path / "out"), "--model", "0123456789ab"]
    result = CliRunner().invoke(main, [*args, "--field", "txt"], env=env)
    assert result.exit_code == 0, result.output
    assert f"warning: {source}: no record holds text to translate in --field 'txt'; " in result.stderr
    result = CliRunner().invoke(main, [*args, "--field", "text"], env=env)
    assert result.exit_code == 0 and "warning" not in result.stderr, result.output


def test_submit_reports_bad_files_and_submits_the_others(redis_server, tmp_path):
    redis_server.client().flushdb()
    store = JobStore.from_settings(Settings(redis_url=redis_server.url))
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "good.txt").write_text("Hello there.\n")
    (inputs / "also.md").write_text("# Fine\n")
    os.mkfifo(inputs / "pipe.txt")
    (inputs / "long.txt").write_text("Fine.\n" + "x" * 200_000 + "\n")
    (inputs / "deep.jsonl").write_text("[" * 100_000 + "\n")
    (inputs / "odd\udcff.txt").write_text("Fine.\n")  # the name's byte 0xff is no UTF-8
    env = {**os.environ, "TRANSQUEUE_REDIS_URL": redis_server.url, "TRANSQUEUE_MAX_LINE_BYTES": "150000"}

    def submit(*args: object, stdin: str | None = None) -> subprocess.CompletedProcess:
        command = [TRANSQUEUE, "submit", *map(str, args)]
        return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=120, env=env)

    out = ["--out", tmp_path / "out", "--field", "text"]
    strict = submit(inputs, *out, "--strict")
    assert strict.returncode == 1 and strict.stdout == ""
    assert strict.stderr.splitlines()[-1] == "Error: nothing submitted: 4 of 6 files failed (--strict)"
    assert list(store.job_ids()) == []

    done = submit(inputs, *out)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"error: {inputs / 'deep.jsonl'}:1:257: invalid JSON: nested deeper than 256 arrays and objects",
        f"error: {inputs / 'long.txt'}:2: line longer than 150,000 bytes (TRANSQUEUE_MAX_LINE_BYTES)",
        f"error: {inputs}/odd\\udcff.txt: the file name is not UTF-8, which a job cannot store",
        f"error: {inputs / 'pipe.txt'}: not a regular file (a FIFO); not read",
        "submitted 2 of 6 files; 4 failed",
    ]
    job_id = done.stdout.strip()
    assert [record.name for record in store.documents(job_id)] == [
        str(inputs / "also.md"),
        str(inputs / "good.txt"),
    ]

    direct = submit(inputs / "pipe.txt", *out)
    assert direct.returncode == 1
    assert f"error: {inputs / 'pipe.txt'}: not a regular file (a FIFO); not read" in direct.stderr
    streamed = submit("-", stdin="Hello.\n" + "x" * 200_000 + "\n")
    assert streamed.returncode == 1
    assert "Error: <stdin>:2: line longer than 150,000 bytes (TRANSQUEUE_MAX_LINE_BYTES)" in streamed.stderr
    assert list(store.job_ids()) == [job_id]


def test_submit_names_a_bad_file_as_it_was_given_like_translate(redis_server, tmp_path, monkeypatch):
    redis_server.client().flushdb()
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "good.txt").write_text("Hello there.\n")
    (inputs / "deep.jsonl").write_text("[" * 100_000 + "\n")
    os.mkfifo(inputs / "pipe.txt")
    monkeypatch.chdir(tmp_path)
    env = {"TRANSQUEUE_REDIS_URL": redis_server.url}
    deep, pipe = os.path.join("in", "deep.jsonl"), os.path.join("in", "pipe.txt")
    expected = [
        f"error: {deep}:1:257: invalid JSON: nested deeper than 256 arrays and objects",
        f"error: {pipe}: not a regular file (a FIFO); not read",
    ]
    for given in (["in"], [deep, pipe, os.path.join("in", "good.txt")]):
        translated = CliRunner().invoke(main, ["translate", *given, "--field", "text", "-o", "zh/"])
        submitted = CliRunner().invoke(main, ["submit", *given, "--field", "text", "--out", "out"], env=env)
        assert translated.exit_code == submitted.exit_code == 1
        assert errors_of(translated.output) == errors_of(submitted.output) == expected


class UnreadableStdin(io.RawIOBase):
    """A stdin whose every read fails as a read of a broken device does (EIO)."""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray) -> int:
        if not len(buffer):  # the test runner's probe of what the stream reads
            return 0
        raise OSError(errno.EIO, "Input/output error")


def test_submit_names_stdin_when_reading_it_fails(redis_server):
    redis_server.client().flushdb()
    env = {"TRANSQUEUE_REDIS_URL": redis_server.url}
    submitted = CliRunner().invoke(main, ["submit", "-"], input=UnreadableStdin(), env=env)
    assert submitted.exit_code == 1 and "Traceback" not in submitted.output, submitted.output
    assert submitted.output == "Error: <stdin>: Input/output error\n"  # was "None: Input/output error"
    assert list(JobStore.from_settings(Settings(redis_url=redis_server.url)).job_ids()) == []


def errors_of(output: str) -> list[str]:
    """The lines of `output` that report a file, sorted (translate reports some only once read)."""
    return sorted(line for line in output.splitlines() if line.startswith("error: "))


def test_fetch_reports_an_output_it_cannot_write_and_writes_the_others(redis_server, tmp_path):
    store, job_id, env = unfinished_job(redis_server, tmp_path)
    for slot in range(store.info(job_id).total):
        store.record(job_id, slot, f"s{slot}", f"译{slot}", fingerprint="f", hit=False)
    out = tmp_path / "fetched"
    (target,) = [record.target for record in store.documents(job_id)]
    (out / target).mkdir(parents=True)  # a directory where the output goes
    skipped = CliRunner().invoke(main, ["fetch", job_id, "--out", str(out)], env=env)
    assert skipped.exit_code == 0 and "1 skipped (output exists; --force overwrites)" in skipped.output
    fetched = CliRunner().invoke(main, ["fetch", job_id, "--out", str(out), "--force"], env=env)
    assert fetched.exit_code == 1 and "Traceback" not in fetched.output, fetched.output
    assert f"error: {out / target}: Is a directory" in fetched.output  # the path, as translate says it


def test_fetch_keeps_existing_outputs_and_its_report_off_inputs_and_outputs(redis_server, tmp_path):
    store, job_id, env = unfinished_job(redis_server, tmp_path)
    for slot in range(store.info(job_id).total):
        store.record(job_id, slot, f"s{slot}", f"译{slot}", fingerprint="f", hit=False)
    out = tmp_path / "fetched"
    (record,) = store.documents(job_id)
    for report in (Path(record.name), out / record.target):
        result = CliRunner().invoke(
            main, ["fetch", job_id, "--out", str(out), "--report", str(report)], env=env
        )
        assert result.exit_code == 2 and "is one of the job's inputs or outputs" in result.output
    assert CliRunner().invoke(main, ["fetch", job_id, "--out", str(out)], env=env).exit_code == 0
    (out / record.target).write_text("my reviewed translation\n", encoding="utf-8")
    again = CliRunner().invoke(main, ["fetch", job_id, "--out", str(out)], env=env)
    assert again.exit_code == 0 and "0 of 1 documents written" in again.output
    assert (out / record.target).read_text(encoding="utf-8") == "my reviewed translation\n"
    forced = CliRunner().invoke(main, ["fetch", job_id, "--out", str(out), "--force"], env=env)
    assert forced.exit_code == 0 and "译" in (out / record.target).read_text(encoding="utf-8")


def test_a_fetch_report_may_go_into_the_output_directory_the_fetch_makes(redis_server, tmp_path):
    store, job_id, env = unfinished_job(redis_server, tmp_path)
    for slot in range(store.info(job_id).total):
        store.record(job_id, slot, f"s{slot}", f"译{slot}", fingerprint="f", hit=False)
    elsewhere = tmp_path / "elsewhere" / "flags.jsonl"  # a directory the fetch writes nothing in
    args = ["fetch", job_id, "--out", str(tmp_path / "new"), "--report", str(elsewhere)]
    refused = CliRunner().invoke(main, args, env=env)
    assert refused.exit_code == 1 and "cannot write the report" in refused.output, refused.output
    assert not (tmp_path / "new").exists() and not elsewhere.parent.exists()
    report = tmp_path / "new" / "flags.jsonl"
    args = ["fetch", job_id, "--out", str(tmp_path / "new"), "--report", str(report)]
    fetched = CliRunner().invoke(main, args, env=env)
    assert fetched.exit_code == 0 and report.is_file(), fetched.output
    (record,) = store.documents(job_id)
    assert "译" in (tmp_path / "new" / record.target).read_text(encoding="utf-8")


def test_a_job_missing_a_stored_record_is_one_line_not_a_traceback(redis_server, tmp_path):
    store, job_id, env = unfinished_job(redis_server, tmp_path)
    store.client.delete(JobKeys(job_id).windows)  # expired part way, or evicted
    for command in ("status", "fetch"):
        result = CliRunner().invoke(main, [command, job_id], env=env)
        assert result.exit_code == 1, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert f"job {job_id} has no window 0 of document 0" in result.output, command


@pytest.mark.parametrize("part", ["windows", "layouts", "dead"])
def test_a_record_nested_too_deeply_for_json_is_one_line_not_a_traceback(redis_server, tmp_path, part):
    store, job_id, env = unfinished_job(redis_server, tmp_path)
    for slot in range(store.info(job_id).total):
        store.record(job_id, slot, "s", "译", fingerprint="f", hit=False)
    store.client.delete(JobKeys(job_id).results)  # the slots are dead letters instead
    for slot in range(store.info(job_id).total):
        store.client.hset(JobKeys(job_id).dead, str(slot), DeadLetter(slot, "s", "r", 0, 1, 1.0).to_json())
    key = getattr(JobKeys(job_id), part)
    store.client.hset(key, "0" if part == "dead" else "0:0", "[" * 100_000)  # tampered
    result = CliRunner().invoke(main, ["fetch", job_id, "--out", str(tmp_path / "elsewhere")], env=env)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert "Error: " in result.output and "Traceback" not in result.output


def test_a_stdin_job_whose_record_says_parquet_is_one_line_not_a_traceback(redis_server):
    redis_server.client().flushdb()
    env = {"TRANSQUEUE_REDIS_URL": redis_server.url, "TRANSQUEUE_QUEUE": "nobody"}
    submitted = CliRunner().invoke(
        main, ["submit", "-", "--model", "0123456789ab"], input="Hello.\n", env=env
    )
    job_id = submitted.output.strip()
    store = JobStore.from_settings(Settings(redis_url=redis_server.url))
    store.record(job_id, 0, "Hello.", "你好。", fingerprint="f", hit=False)
    keys = JobKeys(job_id)
    record = json.loads(store.client.hget(keys.docs, "0"))
    store.client.hset(keys.docs, "0", json.dumps({**record, "fmt": "parquet"}))  # tampered
    store.client.hset(keys.layouts, "0:0", '{"cells":[' + store.client.hget(keys.layouts, "0:0") + "]}")
    result = CliRunner().invoke(main, ["fetch", job_id], env=env)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert "Error: <stdin> unit 1: a stdin job holds no Parquet document" in result.output


@pytest.mark.parametrize("stored", ["", "nan", "../elsewhere"])
def test_fetch_never_writes_to_a_stored_output_directory_that_is_not_absolute(
    redis_server, tmp_path, monkeypatch, stored
):
    """Submit stores the output directory resolved: a relative one (or none) would have made
    fetch write into whatever directory it runs in."""
    store, job_id, env = unfinished_job(redis_server, tmp_path)
    for slot in range(store.info(job_id).total):
        store.record(job_id, slot, "s", "译", fingerprint="f", hit=False)
    store.client.hset(JobKeys(job_id).meta, "out", stored)  # tampered
    monkeypatch.chdir(tmp_path / "out")
    result = CliRunner().invoke(main, ["fetch", job_id], env=env)
    assert result.exit_code == 1 and "is not an absolute path; pass --out DIR" in result.output, result.output
    assert not any((tmp_path / "out").iterdir()) and not (tmp_path / "elsewhere").exists()


def test_metrics_on_a_port_in_use_is_one_line(redis_server):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        result = CliRunner().invoke(
            main, ["metrics", "--port", port], env={"TRANSQUEUE_REDIS_URL": redis_server.url}
        )
    assert result.exit_code == 1 and f"cannot serve metrics on 127.0.0.1:{port}" in result.output


def test_fetch_of_stdin_names_the_unit_of_each_untranslated_sentence(redis_server):
    redis_server.client().flushdb()
    env = {"TRANSQUEUE_REDIS_URL": redis_server.url, "TRANSQUEUE_QUEUE": "nobody"}
    submitted = CliRunner().invoke(main, ["submit", "-"], input="Hello there.\nGood night.\n", env=env)
    assert submitted.exit_code == 0, submitted.output
    job_id = submitted.output.strip()
    store = JobStore.from_settings(Settings(redis_url=redis_server.url))
    store.record(job_id, 0, "Hello there.", "你好。", fingerprint="f", hit=False)
    letter = DeadLetter(
        slot=1, text="Good night.", reason="BundleError('gone')", chunk=0, deliveries=3, at=0.0
    )
    store.dead_letter(job_id, letter)
    fetched = CliRunner().invoke(main, ["fetch", job_id], env=env)
    assert fetched.exit_code == 1
    assert "<stdin> unit 2: left untranslated (BundleError('gone')): 'Good night.'" in fetched.output
    for report in ("-", "/dev/stdout"):  # where the records go: they would be mixed
        mixed = CliRunner().invoke(main, ["fetch", job_id, "--report", report], env=env)
        assert mixed.exit_code == 2 and f"--report {report}: the job's output goes to stdout" in mixed.output


def test_fetch_report_names_documents_as_translate_does_and_keeps_skipped_ones(
    redis_server, tmp_path, monkeypatch
):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("Tom is 25 years old.\n", encoding="utf-8")
    (corpus / "b.txt").write_text("He has 31 cats.\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    store, job_id, env = unfinished_job(redis_server, tmp_path, Path("corpus"))
    for slot in range(store.info(job_id).total):
        store.record(job_id, slot, "", f"译{slot}", fingerprint="f", hit=False)  # digits flagged
    report = tmp_path / "flags.jsonl"
    args = ["fetch", job_id, "--report", str(report)]
    fetched = CliRunner().invoke(main, args, env=env)
    assert fetched.exit_code == 0, fetched.output
    records = report.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["document"] for line in records] == ["corpus/a.txt", "corpus/b.txt"]
    (tmp_path / "out" / "b.txt").unlink()
    monkeypatch.chdir(tmp_path / "out")  # records are matched by path, not by how they are named
    again = CliRunner().invoke(main, args, env=env)
    assert again.exit_code == 0 and "1 of 2 documents written" in again.output, again.output
    assert "1 skipped" in again.output
    now = sorted(report.read_text(encoding="utf-8").splitlines())
    assert now == sorted(
        [records[0], records[1].replace('"corpus/b.txt"', json.dumps(str(corpus / "b.txt")))]
    )


def test_corrupt_dead_letters_errors_and_orphans_are_one_line_not_a_traceback(redis_server, tmp_path):
    store, job_id, env = unfinished_job(redis_server, tmp_path)
    keys = JobKeys(job_id)
    store.client.lpush("tq:orphans", "garbage")  # a set-aside message's record, not JSON
    jobs = CliRunner().invoke(main, ["jobs"], env=env)
    assert jobs.exit_code == 0 and "1 chunk messages were set aside" in jobs.output, jobs.output
    store.client.lpush(keys.errors, '{"error": "x"}')  # no worker
    status = CliRunner().invoke(main, ["status", job_id], env=env)
    assert status.exit_code == 1 and isinstance(status.exception, SystemExit), status.output
    assert f"Error: {keys.errors} entry 0 is not a record of this transqueue" in status.output
    store.client.delete(keys.errors)
    store.client.hset(keys.dead, "0", '{"slot": 0}')  # a dead letter without its fields
    for command in ("status", "fetch"):
        result = CliRunner().invoke(main, [command, job_id], env=env)
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
        assert f"Error: {keys.dead} field 0 is not a record of this transqueue" in result.output, command


def test_a_document_number_that_is_no_number_is_one_line_not_a_traceback(redis_server, tmp_path):
    store, job_id, env = unfinished_job(redis_server, tmp_path)
    key = JobKeys(job_id).docs
    store.client.hset(key, "x", store.client.hget(key, "0"))  # tampered
    result = CliRunner().invoke(main, ["fetch", job_id], env=env)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert f"Error: {key} field 'x' is not a document number" in result.output


@pytest.mark.parametrize(
    ("field", "value"), [("created", "nan"), ("created", "1e300"), ("started_at", "-inf")]
)
def test_a_job_time_that_is_no_time_is_named_not_a_traceback(redis_server, tmp_path, field, value):
    store, job_id, env = unfinished_job(redis_server, tmp_path)
    store.client.hset(JobKeys(job_id).meta, field, value)  # tampered: time.gmtime raised on it
    jobs = CliRunner().invoke(main, ["jobs"], env=env)
    assert jobs.exit_code == 0 and f"1 job records are not readable: {job_id}" in jobs.output, jobs.output
    status = CliRunner().invoke(main, ["status", job_id], env=env)
    assert status.exit_code == 1 and isinstance(status.exception, SystemExit), status.output
    assert f"Error: {JobKeys(job_id).meta} does not hold a job" in status.output


def test_stored_bytes_that_are_not_utf8_are_one_line_naming_the_field(redis_server, tmp_path):
    store, job_id, env = unfinished_job(redis_server, tmp_path)
    keys = JobKeys(job_id)
    store.record(job_id, 0, "Hello there.", "你好。", fingerprint="f", hit=False)
    store.client.hset(keys.results, "1", "晚安\udcff")  # the client writes the byte 0xff
    result = CliRunner().invoke(main, ["fetch", job_id], env=env)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert f"Error: {keys.results} field 1 is not a record of this transqueue" in result.output
    assert "not UTF-8 text (character 2)" in result.output
    store.client.hset(keys.meta, "note", "\udcff")
    for command in ("status", "fetch"):
        result = CliRunner().invoke(main, [command, job_id], env=env)
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
        assert f"Error: {keys.meta} does not hold a job (ValueError('not UTF-8 text" in result.output
    result = CliRunner().invoke(main, ["jobs"], env=env)  # lists the others
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output


def test_fetch_stopped_part_way_keeps_the_records_of_the_outputs_there(redis_server, tmp_path, monkeypatch):
    """A --follow fetch stopped while it waits for the first document (cancelled here, or
    Ctrl-C) never reaches the others, whose outputs an earlier fetch wrote: their records
    stay in the report."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, text in (
        ("a.txt", "Hello there."),
        ("b.txt", "Tom is 25 years old."),
        ("c.txt", "He has 31 cats."),
    ):
        (corpus / name).write_text(text + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    store, job_id, env = unfinished_job(redis_server, tmp_path, Path("corpus"))
    for slot in range(1, store.info(job_id).total):  # a.txt's slot 0 stays unsettled
        store.record(job_id, slot, "", f"译{slot}", fingerprint="f", hit=False)  # digits flagged
    report = tmp_path / "flags.jsonl"
    first = CliRunner().invoke(main, ["fetch", job_id, "--report", str(report)], env=env)
    assert first.exit_code == 1 and "2 of 3 documents written" in first.output, first.output
    records = report.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["document"] for line in records] == ["corpus/b.txt", "corpus/c.txt"]
    cancel = threading.Timer(1.0, store.cancel, args=[job_id])
    cancel.start()
    try:
        stopped = CliRunner().invoke(main, ["fetch", job_id, "--follow", "--report", str(report)], env=env)
    finally:
        cancel.cancel()
    assert stopped.exit_code == 1 and "cancelled" in stopped.output, stopped.output
    assert sorted(report.read_text(encoding="utf-8").splitlines()) == sorted(records)


def test_runs_of_an_inbox_with_none_says_so(redis_server):
    redis_server.client().flushdb()
    result = CliRunner().invoke(main, ["runs", "nosuch"], env={"TRANSQUEUE_REDIS_URL": redis_server.url})
    assert result.exit_code == 0
    assert "no runs recorded for inbox 'nosuch': not run yet, or not the name of an entry" in result.output


def test_runs_names_a_corrupt_record_in_one_line_after_the_valid_runs(redis_server):
    from store.runs import NOTHING_NEW, InboxRun, RunStore

    redis_server.client().flushdb()
    RunStore(redis_server.client()).save(
        InboxRun("0000000000001-aaaa", "docs", 1.0, NOTHING_NEW, finished=2.0)
    )
    redis_server.client().hset("tq:inbox:docs:runs", "0000000000002-bbbb", '{"run_id": 1}')
    result = CliRunner().invoke(main, ["runs", "docs"], env={"TRANSQUEUE_REDIS_URL": redis_server.url})
    assert result.exit_code == 1 and "Traceback" not in result.output
    listed, error = result.output.splitlines()
    assert listed.startswith("0000000000001-aaaa  1970-01-01 00:00:01  nothing new")
    assert error.startswith(
        "Error: tq:inbox:docs:runs entry '0000000000002-bbbb' is not a run record of this transqueue ("
    )


def test_submit_refuses_an_output_directory_whose_name_is_not_utf8(redis_server, tmp_path):
    """A job stores its output directory as text: one whose name holds bytes that are not
    UTF-8 (0xff here) would make the job's record unreadable, its chunks set aside."""
    redis_server.client().flushdb()
    store = JobStore.from_settings(Settings(redis_url=redis_server.url))
    (tmp_path / "a.txt").write_text("Hello there.\n", encoding="utf-8")
    env = {"TRANSQUEUE_REDIS_URL": redis_server.url, "TRANSQUEUE_QUEUE": "nobody"}
    out = tmp_path / "out\udcff"
    result = CliRunner().invoke(main, ["submit", str(tmp_path / "a.txt"), "--out", str(out)], env=env)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "not UTF-8" in result.output and "out\\udcff" in result.output
    assert list(store.job_ids()) == []


@pytest.mark.parametrize("option", ["--field", "--column"])
def test_submit_refuses_a_field_or_column_name_that_is_not_utf8(redis_server, tmp_path, option):
    """The job's document records hold them as text: the byte 0xff would make every fetch
    of the job fail on a corrupt record."""
    redis_server.client().flushdb()
    store = JobStore.from_settings(Settings(redis_url=redis_server.url))
    source = tmp_path / ("a.jsonl" if option == "--field" else "a.csv")
    source.write_text('{"text": "Hello there."}\n' if option == "--field" else "text\nHello there.\n")
    env = {"TRANSQUEUE_REDIS_URL": redis_server.url, "TRANSQUEUE_QUEUE": "nobody"}
    args = ["submit", str(source), "--out", str(tmp_path / "out"), option, "te\udcffxt"]
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert "'te\\udcffxt' is not UTF-8" in result.output
    assert list(store.job_ids()) == []


def test_status_says_in_how_many_finished_documents_the_flags_are(redis_server, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    (source / "a.txt").write_text("Chapter 12 is long.\n", encoding="utf-8")
    (source / "b.txt").write_text("Hello there.\n", encoding="utf-8")
    (source / "c.txt").write_text("Good night.\n", encoding="utf-8")
    store, job_id, env = unfinished_job(redis_server, tmp_path, source)
    store.record(job_id, 0, "Chapter 12 is long.", "第13章很长。", fingerprint="f", hit=False)
    store.record(job_id, 1, "Hello there.", "你好。", fingerprint="f", hit=False)
    status = CliRunner().invoke(main, ["status", job_id], env=env).output
    # a.txt and b.txt are finished, and only a.txt holds a flag
    assert "flags        1 digits (in 1 of 2 finished documents)\n" in status, status


def test_runs_lists_the_files_invalid_now_and_names_a_corrupt_record(redis_server, monkeypatch):
    from cli import service
    from store.runs import NOTHING_NEW, InboxRun, InvalidFile, RunStore

    redis_server.client().flushdb()
    monkeypatch.setattr(service, "INVALID_SHOWN", 2)
    runs = RunStore(redis_server.client())
    runs.save(InboxRun("0000000000001-aaaa", "docs", 1.0, NOTHING_NEW, finished=2.0))
    runs.mark_invalid("docs", {f"{n}.jsonl": InvalidFile("d", f"line {n}: not JSON", 4.0) for n in range(3)})
    redis_server.client().hset("tq:inbox:docs:invalid", "x.jsonl", "[1]")
    result = CliRunner().invoke(main, ["runs", "docs"], env={"TRANSQUEUE_REDIS_URL": redis_server.url})
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert result.output.splitlines()[1:] == [
        "not translated now: 3 invalid files (tried again once changed)",
        "    0.jsonl: line 0: not JSON (found 1970-01-01 00:00:04)",
        "    1.jsonl: line 1: not JSON (found 1970-01-01 00:00:04)",
        "    … and 1 more",
        "Error: tq:inbox:docs:invalid entry 'x.jsonl' is not an invalid-file record of this transqueue "
        "([1] is not a JSON object)",
    ]


def test_runs_of_an_entry_with_only_an_invalid_file_lists_it_as_one(redis_server):
    from store.runs import InvalidFile, RunStore

    redis_server.client().flushdb()  # its runs trimmed or expired: the invalid file is what is left
    RunStore(redis_server.client()).mark_invalid(
        "docs", {"a.jsonl": InvalidFile("d", "line 2: not JSON", 4.0)}
    )
    result = CliRunner().invoke(main, ["runs", "docs"], env={"TRANSQUEUE_REDIS_URL": redis_server.url})
    assert result.exit_code == 0 and "no runs recorded" not in result.output, result.output
    assert result.output.splitlines() == [
        "not translated now: 1 invalid file (tried again once changed)",
        "    a.jsonl: line 2: not JSON (found 1970-01-01 00:00:04)",
    ]


def test_runs_lists_the_files_whose_output_the_outbox_refused(redis_server, monkeypatch):
    from cli import service
    from store.runs import RefusedFile, RunStore

    redis_server.client().flushdb()
    monkeypatch.setattr(service, "INVALID_SHOWN", 1)
    RunStore(redis_server.client()).mark_refused(
        "docs", {f"{n}.txt": RefusedFile("d", f"{n}.txt: Is a directory{TITLE}", 4.0, "j") for n in range(2)}
    )
    redis_server.client().hset("tq:inbox:docs:refused", "x.txt", '{"digest": "d"}')
    result = CliRunner().invoke(main, ["runs", "docs"], env={"TRANSQUEUE_REDIS_URL": redis_server.url})
    assert result.exit_code == 1 and "no runs recorded" not in result.output, result.output
    assert_escaped(result.output)
    lines = result.output.splitlines()
    assert lines[:3] == [
        "not delivered now: 2 files the outbox refused (written once it takes them; translated again "
        "only if changed)",
        f"    0.txt: Is a directory{SHOWN_TITLE} (since 1970-01-01 00:00:04)",
        "    … and 1 more",
    ]
    assert lines[3].startswith(
        "Error: tq:inbox:docs:refused entry 'x.txt' is not a refused-file record of this transqueue ("
    )
    assert len(lines) == 4


def test_runs_says_how_many_of_a_run_s_files_were_delivered(redis_server):
    from store.runs import DELIVERED, InboxRun, RunStore

    redis_server.client().flushdb()
    runs = RunStore(redis_server.client())
    files = {"a.txt": "x", "b.txt": "y"}
    runs.save(InboxRun("0000000000001-aaaa", "docs", 1.0, DELIVERED, files=files))  # of the previous version
    runs.save(InboxRun("0000000000002-bbbb", "docs", 3.0, DELIVERED, files=files, job="j", delivered=1))
    result = CliRunner().invoke(main, ["runs", "docs"], env={"TRANSQUEUE_REDIS_URL": redis_server.url})
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "0000000000001-aaaa  1970-01-01 00:00:01  delivered    submitted=2",
        "0000000000002-bbbb  1970-01-01 00:00:03  delivered    submitted=2  delivered=1  job=j",
    ]


#: Stored text that sets a terminal's title, and a bidi override, and how the CLI shows them.
TITLE, SHOWN_TITLE = "\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"
OVERRIDE, SHOWN_OVERRIDE = "\u202e", "\\u202e"


def assert_escaped(output: str) -> None:
    """No control character but the line ends, and no bidi override, in `output`."""
    assert "\x1b" not in output and "\x07" not in output and OVERRIDE not in output, output


def test_status_and_jobs_show_stored_text_with_controls_escaped(redis_server, tmp_path):
    store, job_id, env = unfinished_job(redis_server, tmp_path)
    keys = JobKeys(job_id)
    store.client.hset(
        keys.meta, mapping={"origin": f"files{TITLE}", "out": f"/输出/{TITLE}", "model": f"m{OVERRIDE}"}
    )
    letter = DeadLetter(slot=1, text="Good night.", reason=f"boom{TITLE}", chunk=0, deliveries=3, at=0.0)
    store.dead_letter(job_id, letter)
    store.client.lpush(keys.errors, json.dumps({"error": f"bad{TITLE}", "worker": f"w{OVERRIDE}"}))
    status = CliRunner().invoke(main, ["status", job_id], env=env)
    assert status.exit_code == 0, status.output
    assert_escaped(status.output)
    for line in (
        f"job          {job_id} (files{SHOWN_TITLE})",
        f"  1 sentences: boom{SHOWN_TITLE}",
        f"output       /输出/{SHOWN_TITLE}",
        f"  1 × on w{SHOWN_OVERRIDE}: bad{SHOWN_TITLE}",
    ):
        assert line in status.output.splitlines(), status.output
    assert f"model        m{SHOWN_OVERRIDE} (" in status.output

    store.client.hset(keys.meta, "state", f"running{TITLE}")
    for command in (["status", job_id], ["jobs"]):
        result = CliRunner().invoke(main, command, env=env)
        assert result.exit_code == 0 and f"running{SHOWN_TITLE}" in result.output, result.output
        assert_escaped(result.output)
    assert f"files{SHOWN_TITLE}" in result.output  # jobs: the origin

    store.client.hset(keys.dead, TITLE, '{"slot": 0}')  # a corrupt record's error names its field
    result = CliRunner().invoke(main, ["status", job_id], env=env)
    assert result.exit_code == 1 and f"{keys.dead} field {SHOWN_TITLE} is not a record" in result.output
    assert_escaped(result.output)


def test_wait_shows_the_stored_model_and_queue_with_controls_escaped(redis_server, tmp_path, monkeypatch):
    store, job_id, env = unfinished_job(redis_server, tmp_path)
    store.client.hset(JobKeys(job_id).meta, mapping={"model": f"m{TITLE}", "queue": f"q{OVERRIDE}"})
    waited = wait_for_a_job_cancelled_later(store, job_id, env, monkeypatch)
    assert waited.exit_code == 1, waited.output
    assert f"serving model m{SHOWN_TITLE} (queue 'q{SHOWN_OVERRIDE}')" in waited.output
    assert f"consuming queue 'q{SHOWN_OVERRIDE}'?" in waited.output
    assert_escaped(waited.output)


def test_fetch_shows_stored_names_reasons_and_states_with_controls_escaped(redis_server, tmp_path):
    source = tmp_path / f"a{TITLE}.txt"  # a file name is stored text too: only its controls escaped
    source.write_text("Hello there.\nGood night.\n", encoding="utf-8")
    store, job_id, env = unfinished_job(redis_server, tmp_path, source)
    shown_source = str(tmp_path / f"a{SHOWN_TITLE}.txt")
    store.client.hset(JobKeys(job_id).meta, "state", f"running{TITLE}")
    fetched = CliRunner().invoke(main, ["fetch", job_id], env=env)
    assert fetched.exit_code == 1 and f"is running{SHOWN_TITLE}: the other documents" in fetched.output
    assert_escaped(fetched.output)

    out = tmp_path / f"out{OVERRIDE}"
    store.client.hset(JobKeys(job_id).meta, mapping={"state": "running", "out": str(out)})
    store.record(job_id, 0, "Hello there.", "你好。", fingerprint="f", hit=False)
    letter = DeadLetter(slot=1, text="Good night.", reason=f"boom{TITLE}", chunk=0, deliveries=3, at=0.0)
    store.dead_letter(job_id, letter)
    fetched = CliRunner().invoke(main, ["fetch", job_id], env=env)
    assert fetched.exit_code == 1, fetched.output
    assert f"1 of 1 documents written to {tmp_path / f'out{SHOWN_OVERRIDE}'}" in fetched.output
    assert f"{shown_source}:2: left untranslated (boom{SHOWN_TITLE}): 'Good night.'" in fetched.output
    assert_escaped(fetched.output)
    target = out / f"a{TITLE}.zh.txt"
    assert target.read_text(encoding="utf-8") == "你好。\nGood night.\n"

    target.unlink()
    target.mkdir()  # an output fetch cannot write: the error names it
    fetched = CliRunner().invoke(main, ["fetch", job_id, "--force"], env=env)
    assert fetched.exit_code == 1, fetched.output
    assert f"error: {tmp_path / f'out{SHOWN_OVERRIDE}' / f'a{SHOWN_TITLE}.zh.txt'}: " in fetched.output
    assert_escaped(fetched.output)


def test_runs_shows_stored_names_and_messages_with_controls_escaped(redis_server):
    from store.runs import FAILED, InboxRun, InvalidFile, RunStore

    redis_server.client().flushdb()
    runs = RunStore(redis_server.client())
    run_id = f"0000000000001-{TITLE}"
    invalid, skipped = {f"x{TITLE}.jsonl": f"bad{TITLE}"}, {f"文件{OVERRIDE}.txt": f"why{TITLE}"}
    runs.save(InboxRun(run_id, "docs", 1.0, FAILED, invalid=invalid, skipped=skipped, job=f"j{OVERRIDE}"))
    runs.mark_invalid("docs", {f"i{TITLE}.jsonl": InvalidFile("d", f"line 1{TITLE}", 4.0)})
    record = json.dumps({"run_id": "0000000000002-bbbb", TITLE: 1})  # Python's error quotes the key raw
    redis_server.client().hset("tq:inbox:docs:runs", "0000000000002-bbbb", record)
    result = CliRunner().invoke(main, ["runs", "docs"], env={"TRANSQUEUE_REDIS_URL": redis_server.url})
    assert result.exit_code == 1, result.output
    assert_escaped(result.output)
    lines = result.output.splitlines()
    assert lines[0].startswith(f"0000000000001-{SHOWN_TITLE}  1970-01-01 00:00:01  failed")
    assert lines[0].endswith(f"job=j{SHOWN_OVERRIDE}")
    assert lines[1:5] == [
        f"    invalid x{SHOWN_TITLE}.jsonl: bad{SHOWN_TITLE}",
        f"    skipped 文件{SHOWN_OVERRIDE}.txt: why{SHOWN_TITLE} (tried again next run)",
        "not translated now: 1 invalid file (tried again once changed)",
        f"    i{SHOWN_TITLE}.jsonl: line 1{SHOWN_TITLE} (found 1970-01-01 00:00:04)",
    ]
    assert f"unexpected keyword argument '{SHOWN_TITLE}'" in lines[5]


def test_an_error_quoting_a_stored_target_shows_it_with_controls_escaped(redis_server, tmp_path):
    redis_server.client().flushdb()
    store = JobStore.from_settings(Settings(redis_url=redis_server.url))
    job_id = finished_job(store, f"link{TITLE}/a.txt")
    out, outside = tmp_path / "out", tmp_path / "outside"
    out.mkdir()
    outside.mkdir()
    (out / f"link{TITLE}").symlink_to(outside)
    result = CliRunner().invoke(
        main, ["fetch", job_id, "--out", str(out)], env={"TRANSQUEUE_REDIS_URL": redis_server.url}
    )
    assert result.exit_code == 1 and "a symbolic link leads out of it" in result.output, result.output
    assert f"Error: {out}/link{SHOWN_TITLE}/a.txt: refusing to write outside" in result.output
    assert_escaped(result.output)


def test_a_translation_longer_than_the_model_writes_is_one_line_not_a_file_of_its_copies(
    redis_server, tmp_path
):
    """A sentence repeated in a document is one slot, rendered once per segment: a huge
    stored translation of it made fetch write (and hold) as many copies."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("Good night.\n", encoding="utf-8")
    (corpus / "b.txt").write_text("Hello there. " * 50 + "\n", encoding="utf-8")
    store, job_id, env = unfinished_job(redis_server, tmp_path, corpus)
    store.record(job_id, 0, "Good night.", "晚安。", fingerprint="f", hit=False)
    store.record(job_id, 1, "Hello there.", "你好。", fingerprint="f", hit=False)
    assert set(store.window(job_id, 1, 0).slots) == {1}
    key = JobKeys(job_id).results
    store.client.hset(key, "1", "x" * 100_000)  # tampered: fetch wrote 5 MB
    out = tmp_path / "fetched"
    for args in (["fetch", job_id, "--out", str(out)], ["status", job_id]):
        result = CliRunner().invoke(main, args, env=env)
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
        assert result.output.endswith(
            f"Error: {key} field 1 holds a translation of 100000 bytes, "
            "more than the model can write for its sentence (30400)\n"
        )
    assert (out / "a.txt").read_text(encoding="utf-8") == "晚安。\n" and not (out / "b.txt").exists()
