"""The `transqueue` command line: one click group, with commands from small modules."""

from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="transqueue")
def main() -> None:
    """Translate documents English→Chinese, in-process or on Celery workers."""


from producer.cmd_model import export_command, validate_command  # noqa: E402

main.add_command(export_command)
main.add_command(validate_command)


from producer import cmd_jobs, cmd_service  # noqa: E402

for command in (*cmd_jobs.COMMANDS, *cmd_service.COMMANDS):
    main.add_command(command)


from producer.cmd_translate import translate_command  # noqa: E402

main.add_command(translate_command)
