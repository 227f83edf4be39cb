"""The `transqueue` command line: one click group, one module per command group.

- `cli.translate`: translate (in-process, no Redis);
- `cli.jobs`: submit, status, wait, fetch, jobs, cancel (distributed jobs);
- `cli.service`: worker, scheduler, metrics, runs (long-running services);
- `cli.model`: export, validate (model bundles; the export extra);
- `cli.common`: what they share (settings, the job store, errors, formatting).
"""

from __future__ import annotations

import click

from cli import jobs, model, service, translate
from cli.common import TransqueueGroup


@click.group(cls=TransqueueGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="transqueue")
def main() -> None:
    """Translate documents English→Chinese, in-process or on Celery workers."""


for group in (translate, jobs, service, model):
    for command in group.COMMANDS:
        main.add_command(command)
