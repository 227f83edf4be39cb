"""cli.jobs: the job commands against a real redis-server (no workers needed)."""

from __future__ import annotations

import os

from click.testing import CliRunner

from cli import main
from store.config import Settings
from store.jobstore import JobStore

pytest_plugins = ["distributed_support"]


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
