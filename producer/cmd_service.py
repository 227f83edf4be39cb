"""`transqueue worker/metrics/runs`: run a worker, export metrics, list scheduled inbox runs."""

from __future__ import annotations

import threading
import time

import click
from prometheus_client import start_http_server
from prometheus_client.registry import CollectorRegistry

from producer.cmd_jobs import cli_settings, cli_store
from worker import defaults
from worker.celery import app
from worker.inbox import list_runs
from worker.metrics import JobMetrics


@click.command("worker", context_settings={"ignore_unknown_options": True})
@click.option("--pool", type=click.Choice(["prefork", "solo", "threads"]),
              help=f"Celery pool [TRANSQUEUE_POOL, default {defaults.POOL}].")
@click.option("-c", "--concurrency", type=click.IntRange(min=1),
              help=f"Processes or threads [TRANSQUEUE_CONCURRENCY, default "
                   f"{defaults.CONCURRENCY}].")
@click.option("--loglevel", default="info", show_default=True)
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED)
def worker_command(pool: str | None, concurrency: int | None, loglevel: str,
                   celery_args: tuple[str, ...]) -> None:
    """Start a Celery worker with transqueue's defaults (extra arguments go to Celery).

    The same as `celery -A worker worker`; configure it with TRANSQUEUE_* variables
    (TRANSQUEUE_REDIS_URL, TRANSQUEUE_BUNDLE, TRANSQUEUE_THREADS, ...). It consumes both
    the chunk queue (TRANSQUEUE_QUEUE) and the inbox queue (TRANSQUEUE_INBOX_QUEUE); pass
    `-Q NAME` to consume only one.
    """
    settings = cli_settings()
    app.worker_main([
        "worker", f"--pool={pool or settings.pool}",
        f"--concurrency={concurrency or settings.concurrency}", f"--loglevel={loglevel}",
        *celery_args,
    ])


@click.command("metrics")
@click.option("--port", type=int, help=f"[TRANSQUEUE_METRICS_PORT, default "
                                       f"{defaults.METRICS_PORT}]")
@click.option("--addr", default="0.0.0.0", show_default=True)
def metrics_command(port: int | None, addr: str) -> None:
    """Serve job-level Prometheus metrics (read from Redis at each scrape) on /metrics."""
    store = cli_store()
    registry = CollectorRegistry()
    registry.register(JobMetrics(store))
    port = port or store.settings.metrics_port
    start_http_server(port, addr=addr, registry=registry)
    click.echo(f"serving metrics on http://{addr}:{port}/metrics", err=True)
    threading.Event().wait()


@click.command("runs")
@click.argument("inbox")
def runs_command(inbox: str) -> None:
    """List the recorded runs of a scheduled inbox entry, oldest first."""
    for run in list_runs(cli_store(), inbox):
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(run.started))
        line = f"{run.run_id}  {started}  {run.state:11}  files={len(run.files)}"
        if run.job:
            line += f"  job={run.job}"
        if run.dead:
            line += f"  dead={run.dead}"
        click.echo(line + (f"  {run.message}" if run.message else ""))
        for name, error in sorted(run.invalid.items()):
            click.echo(f"    invalid {name}: {error}")
        for name, why in sorted(run.skipped.items()):
            click.echo(f"    skipped {name}: {why} (tried again next run)")


COMMANDS = (worker_command, metrics_command, runs_command)
