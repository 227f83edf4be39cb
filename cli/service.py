"""`transqueue worker/scheduler/metrics/runs`: the long-running services, and inbox runs."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cli.common import cli_settings, cli_store, echo_printable, model_key_of, refuse_bad_credentials
from store import defaults
from store.config import POOLS

if TYPE_CHECKING:
    from celery import Celery

#: Invalid files of an inbox, and files whose output its outbox refused, listed by
#: `transqueue runs` (the count says how many more).
INVALID_SHOWN = 20

#: What a scheduler started without TRANSQUEUE_SCHEDULE says: it still consumes the inbox
#: queue, so next to a configured scheduler it would take and drop some of its tasks.
NO_SCHEDULE = (
    "warning: TRANSQUEUE_SCHEDULE is not set: this scheduler scans no inbox, and drops the "
    "scans and deliveries it takes from the inbox queue (TRANSQUEUE_INBOX_QUEUE)"
)


@click.command("worker", context_settings={"ignore_unknown_options": True})
@click.option(
    "--pool", type=click.Choice(POOLS), help=f"Celery pool [TRANSQUEUE_POOL, default {defaults.POOL}]."
)
@click.option(
    "-c",
    "--concurrency",
    type=click.IntRange(1, defaults.MAX_CONCURRENCY),
    help=f"Processes or threads [TRANSQUEUE_CONCURRENCY, default {defaults.CONCURRENCY}].",
)
@click.option("--loglevel", default="info", show_default=True)
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED)
def worker_command(
    pool: str | None, concurrency: int | None, loglevel: str, celery_args: tuple[str, ...]
) -> None:
    """Start a Celery worker with transqueue's defaults (extra arguments go to Celery).

    Like `celery -A worker worker --without-mingle --without-gossip`; configure it with
    TRANSQUEUE_* variables
    (TRANSQUEUE_REDIS_URL, TRANSQUEUE_BUNDLE, TRANSQUEUE_THREADS, ...). It consumes its
    model's chunk queue (TRANSQUEUE_QUEUE.<model key>).
    """
    from models.bundle import BundleError
    from worker.malloc import tune_malloc
    from worker.runtime import check_bundle, explained, preload_translator

    settings = cli_settings()
    try:  # the files' sha256 are checked, and warnings logged, as the worker loads the model
        check_bundle(settings, hashes=False)  # (worker.tasks)
    except BundleError as error:
        raise click.ClickException(f"cannot load the model: {explained(error)}") from None
    pool, concurrency = pool or settings.pool, concurrency or settings.concurrency
    if pool != "prefork":  # the model loads in this process: start now, while Celery is
        tune_malloc()  # imported and starts (before this process's first thread)
        preload_translator(settings)
    from worker.celery import app

    refuse_bad_credentials(settings)
    # Celery replaces a --pool=prefork flag (its default) by the configured pool, so the
    # configuration must name the pool chosen here too.
    app.conf.update(worker_pool=pool, worker_concurrency=concurrency)
    run_celery_worker(
        app, [f"--pool={pool}", f"--concurrency={concurrency}", f"--loglevel={loglevel}", *celery_args]
    )


def run_celery_worker(app: Celery, args: list[str]) -> None:
    """Run Celery's `worker` command for `app` with `args`, without mingle and gossip.

    The command is called directly rather than through `app.worker_main`, whose `celery`
    command group imports every Celery subcommand (its shell and REPL among them: 15 MB
    and 0.2 s more for each worker). Mingle (which waits a second at start-up for other
    workers' revoked tasks) and gossip (other workers' events) serve nothing transqueue
    uses: it revokes no task, and Flower reads the task events either way.
    """
    from celery.bin.base import CLIContext
    from celery.bin.worker import worker

    context = CLIContext(app=app, no_color=None, workdir=None)
    code = worker.main(
        args=["--without-mingle", "--without-gossip", *args],
        prog_name="celery worker",
        obj=context,
        standalone_mode=False,
    )
    if code:
        raise SystemExit(code)


@click.command("scheduler", context_settings={"ignore_unknown_options": True})
@click.option(
    "--beat/--no-beat",
    default=True,
    show_default=True,
    help="Also send the scans of the TRANSQUEUE_SCHEDULE entries on time.",
)
@click.option(
    "-s",
    "--schedule",
    "beat_state",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("celerybeat-schedule"),
    show_default=True,
    help="Beat's state file (when each entry last ran), in a writable directory.",
)
@click.option("--loglevel", default="info", show_default=True)
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED)
def scheduler_command(beat: bool, beat_state: Path, loglevel: str, celery_args: tuple[str, ...]) -> None:
    """Run scheduled inbox jobs: scan inboxes, submit new files, deliver finished jobs.

    A Celery worker on the inbox queue (TRANSQUEUE_INBOX_QUEUE) with beat embedded; it needs
    the inbox and outbox directories of TRANSQUEUE_SCHEDULE, the translation workers do not.
    Extra arguments go to Celery.
    """
    from producer.protect import ProtectError, env_patterns
    from producer.schedule import ScheduleError
    from producer.scheduler import app, schedule_of

    settings = cli_settings()
    if settings.schedule:  # read here first, so that a bad file is one line, not a traceback
        try:
            schedule_of(settings.schedule)
            env_patterns()  # else every scanned file would be listed as invalid, run after run
        except (ScheduleError, ProtectError) as error:
            raise click.ClickException(str(error)) from None
        model_key_of(None, settings)  # the model its jobs ask for: else every scan would fail
    else:
        click.echo(NO_SCHEDULE, err=True)
    if beat:
        _check_beat_state(beat_state)
    refuse_bad_credentials(settings)
    beat_args = ["--beat", f"--schedule={beat_state}"] if beat else []
    run_celery_worker(app, ["--pool=solo", f"--loglevel={loglevel}", *beat_args, *celery_args])


def _check_beat_state(path: Path) -> None:
    """A one-line error unless beat can keep its state in `path`: where it cannot, beat dies
    with tracebacks as it starts while the scheduler runs on, sending no scan ever."""
    directory = path.parent.resolve()
    if not directory.is_dir():
        raise click.ClickException(
            f"--schedule {path}: no such directory {directory} (beat keeps its state there)"
        )
    if not os.access(directory, os.W_OK | os.X_OK):
        raise click.ClickException(
            f"--schedule {path}: cannot write in {directory} (beat keeps its state there); "
            "pass --schedule FILE in a writable directory"
        )


@click.command("metrics")
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    help=f"[TRANSQUEUE_METRICS_PORT, default {defaults.METRICS_PORT}]",
)
@click.option(
    "--addr", default="127.0.0.1", show_default=True, help="Address to bind (0.0.0.0 inside a container)."
)
def metrics_command(port: int | None, addr: str) -> None:
    """Serve job-level Prometheus metrics (read from Redis at each scrape) on /metrics."""
    from prometheus_client import start_http_server
    from prometheus_client.registry import CollectorRegistry

    from worker.metrics import JobMetrics

    store = cli_store()
    refuse_bad_credentials(store.settings)
    registry = CollectorRegistry()
    registry.register(JobMetrics(store))
    port = store.settings.metrics_port if port is None else port
    try:
        start_http_server(port, addr=addr, registry=registry)
    except OSError as error:
        raise click.ClickException(
            f"cannot serve metrics on {addr}:{port}: {error.strerror or error}"
        ) from None
    click.echo(f"serving metrics on http://{addr}:{port}/metrics", err=True)
    threading.Event().wait()


@click.command("runs")
@click.argument("inbox")
def runs_command(inbox: str) -> None:
    """List the recorded runs of a scheduled inbox entry, oldest first, then the files of its
    inbox that are not translated now because they are invalid, and those not delivered now
    because the outbox refused their output (up to INVALID_SHOWN of each).

    A record that is not a run, an invalid file or a refused file (tampered with) is one
    error line naming its key and entry, after the rest (exit status 1); the next scan of the
    entry replaces or drops it.
    """
    store = cli_store()
    runs, corrupt = store.runs.read(inbox)
    invalid, corrupt_invalid = store.runs.read_invalid(inbox)
    refused, corrupt_refused = store.runs.read_refused(inbox)
    problems = [*corrupt, *corrupt_invalid, *corrupt_refused]
    if not (runs or invalid or refused or problems):
        # a name mistyped looks the same as an entry not run yet: say so
        click.echo(
            f"no runs recorded for inbox {inbox!r}: not run yet, or not the name of an entry", err=True
        )
    for run in runs:
        line = f"{run.run_id}  {_utc(run.started)}  {run.state:11}  submitted={len(run.files)}"
        if run.delivered is not None:
            line += f"  delivered={run.delivered}"
        if run.job:
            line += f"  job={run.job}"
        if run.dead:
            line += f"  dead={run.dead}"
        echo_printable(line + (f"  {run.message}" if run.message else ""))  # as stored, as below
        for name, error in sorted(run.invalid.items()):
            echo_printable(f"    invalid {name}: {error}")
        for name, why in sorted(run.skipped.items()):
            echo_printable(f"    skipped {name}: {why} (tried again next run)")
    _echo_files(
        "not translated now: {} invalid {} (tried again once changed)",
        [f"{name}: {record.error} (found {_utc(record.found)})" for name, record in invalid.items()],
    )
    _echo_files(
        "not delivered now: {} {} the outbox refused (written once it takes them; translated "
        "again only if changed)",
        [f"{record.error} (since {_utc(record.found)})" for record in refused.values()],
    )
    for problem in problems:
        echo_printable(f"Error: {problem}", err=True)
    if problems:
        click.get_current_context().exit(1)


def _echo_files(header: str, lines: list[str]) -> None:
    """`header` with the count of `lines` and "file" or "files" put in, then the first
    INVALID_SHOWN of the lines, indented (stored text: escaped), and how many more; nothing
    without lines."""
    if not lines:
        return
    click.echo(header.format(len(lines), "file" if len(lines) == 1 else "files"))
    for line in lines[:INVALID_SHOWN]:
        echo_printable(f"    {line}")
    if len(lines) > INVALID_SHOWN:
        click.echo(f"    … and {len(lines) - INVALID_SHOWN} more")


def _utc(when: float) -> str:
    """A stored time as `transqueue runs` shows it: ``2026-12-02 18:40:00`` (UTC)."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(when))


COMMANDS = (worker_command, scheduler_command, metrics_command, runs_command)
