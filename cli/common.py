"""What the command modules share: settings and the job store from the environment, job
lookups and duration formatting, each failing as a clean CLI error."""

from __future__ import annotations

import click

from store.config import ConfigError, Settings
from store.jobstore import JobInfo, JobStore


def cli_settings() -> Settings:
    """Settings from the environment; a bad variable is a clean CLI error."""
    try:
        return Settings.from_env()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def cli_store() -> JobStore:
    """The job store named by the environment."""
    return JobStore.from_settings(cli_settings())


def job_info(store: JobStore, job_id: str) -> JobInfo:
    """The job's counters; a clean CLI error when there is no such job."""
    info = store.info(job_id)
    if info is None:
        raise click.ClickException(f"no job {job_id} (unknown, or expired)")
    return info


def duration(seconds: float | None) -> str:
    """Seconds as ``1h02m03s`` or ``2m03s``; "unknown" for None."""
    if seconds is None:
        return "unknown"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"
