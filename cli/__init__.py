"""The `transqueue` command line: one click group, one module per command group.

- `cli.translate`: translate (in-process, no Redis);
- `cli.jobs`: submit, status, wait, fetch, jobs, cancel (distributed jobs);
- `cli.service`: worker, scheduler, metrics, runs (long-running services);
- `cli.model`: export, validate (model bundles; the export extra);
- `cli.common`: what they share (settings, the job store, errors, formatting).

A command's module is imported when the command runs (or `--help` lists it), so that a
worker does not import the producer's modules: 8 MB and 0.07 s less at its start.
"""

from __future__ import annotations

import importlib

import click

from cli.common import TransqueueGroup, termination_held

#: Command name → the module that defines it (in its COMMANDS).
COMMAND_MODULES = {
    "translate": "cli.translate",
    **dict.fromkeys(("submit", "status", "wait", "fetch", "jobs", "cancel"), "cli.jobs"),
    **dict.fromkeys(("worker", "scheduler", "metrics", "runs"), "cli.service"),
    **dict.fromkeys(("export", "validate"), "cli.model"),
}

#: The commands that stop cleanly on SIGTERM and SIGHUP, with what they did said
#: (`cli.common.stop_cleanly_on_termination`): they hold those signals from when they are
#: chosen, so that one sent while their modules load stops them the same way
STOPPING_CLEANLY = frozenset({"translate"})


class LazyGroup(TransqueueGroup):
    """A group whose commands are imported from `COMMAND_MODULES` when first needed."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command name, in the order of `COMMAND_MODULES`."""
        return list(COMMAND_MODULES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command `cmd_name`, its module imported now; None for an unknown name."""
        if cmd_name not in COMMAND_MODULES:
            return None
        module = importlib.import_module(COMMAND_MODULES[cmd_name])
        return next(command for command in module.COMMANDS if command.name == cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """The command that ``args`` name and its arguments; one in `STOPPING_CLEANLY`
        holds SIGTERM and SIGHUP from now, before its module loads, for as long as it runs
        (`cli.common.termination_held`)."""
        if args and args[0] in STOPPING_CLEANLY:
            ctx.with_resource(termination_held())
        return super().resolve_command(ctx, args)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="transqueue")
def main() -> None:
    """Translate documents English→Chinese, in-process or on Celery workers."""
