"""Options shared by the commands that read documents (translate, submit)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from producer import defaults
from producer.protect import ProtectError, compile_patterns

F = TypeVar("F", bound=Callable[..., Any])


def _protect_patterns(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    """TRANSQUEUE_PROTECT's patterns then ``--protect``'s, each checked to be a usable regex."""
    patterns = (*defaults.PROTECT_PATTERNS, *value)
    try:
        compile_patterns(patterns)
    except ProtectError as error:
        raise click.BadParameter(str(error), ctx, param) from None
    return patterns


def protect_option(command: F) -> F:
    """``--protect REGEX`` (repeatable): text it matches is kept, never translated."""
    return click.option(
        "--protect",
        "protect",
        multiple=True,
        metavar="REGEX",
        callback=_protect_patterns,
        help="Keep text matching REGEX as it is, never translated (repeatable; added to the "
        "built-in protected spans and to TRANSQUEUE_PROTECT, one pattern a line).",
    )(command)
