"""What the command modules share: settings and the job store from the environment, job
lookups, duration formatting, the --report file, and the exit statuses with the errors that lead to them.

Exit statuses (README, "Exit statuses"): 0 success; 1 an error, or a run that finished
with problems (files that failed, sentences left untranslated); 2 a usage error; 3 Redis
unreachable or refusing the credentials.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar
from urllib.parse import urlsplit

import click

from store.config import ConfigError, Settings, redacted
from store.defaults import ENV_PREFIX
from store.errors import printable

if TYPE_CHECKING:
    from store.jobstore import JobInfo, JobStore

F = TypeVar("F", bound=Callable[..., Any])

#: Exit status when Redis cannot be reached or refuses the credentials or the database.
EXIT_REDIS = 3


def redis_failure(url: str, exc: Exception) -> str:
    """One line saying why Redis at `url` (password hidden) cannot be used."""
    import redis

    if isinstance(exc, redis.AuthenticationError):
        hint = "wrong password?" if urlsplit(url).password else "no password in TRANSQUEUE_REDIS_URL"
        reason = f"authentication failed ({hint})"
    else:
        reason = str(exc) or type(exc).__name__
    return f"cannot reach Redis at {redacted(url)}: {reason}"


class TransqueueGroup(click.Group):
    """The command group: turns the errors every command may meet into one line each.

    Importing it imports neither Redis's client nor Celery, so that `transqueue worker`
    can start loading its model before it imports them (`cli.service`).
    """

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; Redis failures exit with `EXIT_REDIS`, bad stored data with 1, and
        Ctrl-C with 130 (128 + SIGINT: a stop, where click's own "Aborted!" exits 1, a
        failure; `translate` and `fetch` print their summary first, `stopped_with_summary`).
        An error's message is shown `printable`: it may quote text read from Redis."""
        try:
            return super().invoke(ctx)
        except click.ClickException as error:
            error.message = printable(error.message)
            raise
        except (click.exceptions.Exit, click.exceptions.Abort):
            raise
        except KeyboardInterrupt:
            sys.exit(128 + signal.SIGINT)
        except Exception as exc:
            _exit_on_known_failure(ctx, exc)
            raise


def _exit_on_known_failure(ctx: click.Context, exc: Exception) -> None:
    """Exit `ctx` with one line if `exc` is a Redis failure or bad stored data; else return.

    Redis unreachable, or refusing the password or the URL's database, exits with
    `EXIT_REDIS`, as the worker, scheduler and metrics exporter do at start
    (`refuse_bad_credentials`)."""
    import redis
    from kombu.exceptions import OperationalError

    from store.jobstore import CorruptRecord
    from store.keys import BadName

    refused_for_good = isinstance(exc, redis.ResponseError) and str(exc).startswith(_REFUSED_FOR_GOOD)
    if refused_for_good or isinstance(exc, redis.ConnectionError | redis.TimeoutError | OperationalError):
        click.echo(f"Error: {redis_failure(_redis_url(), exc)}", err=True)
        ctx.exit(EXIT_REDIS)
    if isinstance(exc, BadName | CorruptRecord):
        raise click.ClickException(printable(str(exc))) from None
    if isinstance(exc, redis.ResponseError):  # OOM, MISCONF, ...
        raise click.ClickException(f"Redis at {redacted(_redis_url())} refused: {exc}") from None


def _redis_url() -> str:
    try:
        return Settings.from_env().redis_url
    except ConfigError:
        return "(unreadable TRANSQUEUE_REDIS_URL)"


def refuse_bad_credentials(settings: Settings) -> None:
    """Exit with one line (`EXIT_REDIS`) if Redis refuses the settings' password or database:
    Celery would retry them forever. A Redis that is down is no error here: the worker,
    scheduler or exporter waits for it."""
    import redis

    client = redis.Redis.from_url(settings.redis_url, socket_connect_timeout=5, socket_timeout=5)
    try:
        client.ping()
        return
    except redis.AuthenticationError as exc:
        refused: Exception = exc
    except redis.ResponseError as exc:  # MISCONF, BUSY, LOADING, ... pass: only these are for good
        if not str(exc).startswith(_REFUSED_FOR_GOOD):
            return
        refused = exc
    except redis.RedisError:  # down, or anything Celery is left to report
        return
    finally:
        client.close()
    click.echo(f"Error: {redis_failure(settings.redis_url, refused)}", err=True)
    click.get_current_context().exit(EXIT_REDIS)


#: Redis replies to a connection's PING that no wait changes: a database index out of range
#: (the URL's /N), an ACL user without the right.
_REFUSED_FOR_GOOD = ("DB index is out of range", "NOPERM")


def echo_printable(line: str, err: bool = False) -> None:
    """Print `line`, which quotes text read from Redis, with the characters a terminal would
    act on escaped (`store.errors.printable`): a stored record may be anyone's who can write
    to Redis."""
    click.echo(printable(line), err=err)


def cli_settings() -> Settings:
    """Settings from the environment; a bad variable is a clean CLI error."""
    try:
        return Settings.from_env()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def cli_store(watching: bool = False) -> JobStore:
    """The job store named by the environment.

    A `watching` command (status, wait, fetch, jobs) rides out a Redis restart: it retries
    for TRANSQUEUE_CLIENT_PATIENCE seconds, saying once that it is waiting.
    """
    from store.jobstore import JobStore

    settings = cli_settings()
    if not watching:
        return JobStore.from_settings(settings)
    said: list[bool] = []

    def say_once(exc: Exception) -> None:
        if not said:
            said.append(True)
            click.echo(
                f"Redis unreachable, retrying for up to {settings.client_patience:.0f} s… ({exc})", err=True
            )

    return JobStore.from_settings(settings, patience=settings.client_patience, on_wait=say_once)


#: The variable naming the model bundle: the default of ``--model``, as for the workers.
BUNDLE_VARIABLE = f"{ENV_PREFIX}BUNDLE"


def model_key_of(model: str | None, settings: Settings) -> str:
    """The model key a job asks for: of the bundle directory `model` (at the settings'
    precision), `model` itself if it is a key, else of the settings' bundle. A bundle that
    cannot be read is a clean CLI error naming where it came from: --model, or else
    TRANSQUEUE_BUNDLE (or the bundled demo model when that is unset)."""
    from models.bundle import BundleError, read_manifest
    from store.queues import model_key

    try:
        if model is None:
            return model_key(settings)
        if re.fullmatch(r"[0-9a-f]{12}", model):
            return model
        return read_manifest(model).model_key(settings.precision)
    except BundleError as error:
        raise click.ClickException(f"{_bundle_origin(model, settings)}: {error}") from None


def _bundle_origin(model: str | None, settings: Settings) -> str:
    """Where the bundle of a job came from, as an error message names it."""
    if model is not None:
        return "--model"
    if settings.bundle:
        return f"{BUNDLE_VARIABLE}={settings.bundle!r}"
    return "the bundled demo model"


class BundleDirectory(click.Path):
    """An existing directory, for ``--model`` with TRANSQUEUE_BUNDLE as its default: a value
    taken from the variable that is no directory is an error naming the variable (exit
    status 1, as every bad TRANSQUEUE_* setting), not a usage error of an option the user
    never passed."""

    def __init__(self) -> None:
        super().__init__(path_type=Path, exists=True, file_okay=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The directory `value` as a Path; click's usage error for a bad ``--model``, a
        one-line error naming TRANSQUEUE_BUNDLE for a bad value of the variable."""
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as error:
            if not _from_environment(ctx, param):
                raise
            raise click.ClickException(f"{BUNDLE_VARIABLE}={str(value)!r}: {error.message}") from None


class VariableOption(click.Option):
    """An option that may also come from an environment variable (``envvar``): every such
    option of every command is one (tests/test_cli.py checks), so that a usage error about
    its value names where the value came from. Click's own hint names the variable whatever the source
    (``'--threads' (env var: 'TRANSQUEUE_THREADS')`` for ``--threads 0``); this one names
    the option alone for a value given on the command line, and the variable read, as the
    source, for a value taken from the environment."""

    def get_error_hint(self, ctx: click.Context | None) -> str:
        """``'--threads'``, or ``TRANSQUEUE_THREADS (environment variable of '--threads')``
        when the value came from the variable."""
        hint = click.Parameter.get_error_hint(self, ctx)  # the option's names, no variable
        if ctx is None or not _from_environment(ctx, self):
            return hint
        return f"{self._variable_read(ctx)} (environment variable of {hint})"

    def _variable_read(self, ctx: click.Context) -> str:
        """The variable whose value the option took: the first set and non-empty of its
        ``envvar`` names and then the context's automatic one, as click reads them."""
        names = [self.envvar] if isinstance(self.envvar, str) else list(self.envvar or ())
        if self.allow_from_autoenv and ctx.auto_envvar_prefix is not None and self.name:
            names.append(f"{ctx.auto_envvar_prefix}_{self.name.upper()}")
        return next(name for name in names if os.environ.get(name))


def _from_environment(ctx: click.Context | None, param: click.Parameter | None) -> bool:
    """Whether `param`'s value in `ctx` was read from its environment variable."""
    if ctx is None or param is None or param.name is None:
        return False
    return ctx.get_parameter_source(param.name) is click.core.ParameterSource.ENVIRONMENT


def record_options(command: F) -> F:
    """The options naming what to translate in records, shared by translate and submit:
    ``--field`` (JSONL, into ``fields``) and ``--column`` (CSV/TSV/Parquet, into ``columns``)."""
    command = click.option(
        "--column",
        "columns",
        multiple=True,
        help="CSV/TSV/Parquet column to translate: a header name, or else a 0-based index (repeatable).",
    )(command)
    return click.option("--field", "fields", multiple=True, help="JSONL field to translate (repeatable).")(
        command
    )


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


def os_failure(error: OSError, unnamed: str | None) -> str:
    """``NAME: reason`` for an OSError that stopped a command: NAME the file it names, else
    `unnamed` (``<stdin>`` while stdin is read, whose errors name no file); the reason alone
    when neither is known."""
    from producer.inputs import failure  # the one ``NAME: reason`` of a file's OSError

    name = error.filename if error.filename is not None else unnamed
    return (error.strerror or str(error)) if name is None else failure(name, error)


def _protect_patterns(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    """TRANSQUEUE_PROTECT's patterns then ``--protect``'s, each checked to be a usable regex
    (a bad variable is an error naming it, a bad option a usage error)."""
    from producer.protect import ProtectError, compile_patterns, env_patterns

    try:
        patterns = env_patterns()
    except ProtectError as error:
        raise click.ClickException(str(error)) from None
    try:
        compile_patterns(value)
    except ProtectError as error:
        raise click.BadParameter(str(error), ctx, param) from None
    return (*patterns, *value)


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


#: The signals that `stop_cleanly_on_termination` makes unwind the process
_TERMINATION = (signal.SIGTERM, signal.SIGHUP)
#: The signals received while `termination_held` and not yet delivered, in order
_held: list[int] = []


def stop_cleanly_on_termination() -> None:
    """Make SIGTERM and SIGHUP unwind this process as Ctrl-C does (exit status 128 + the
    signal's number), so that the temporary file of an output being written is removed on
    the way out: by default they end the process at once and leave it behind. One that
    came while `termination_held` unwinds it now."""

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    for number in _TERMINATION:
        signal.signal(number, stop)
    if _held:
        number = _held[0]
        _held.clear()
        stop(number, None)


@contextmanager
def termination_held() -> Iterator[None]:
    """Hold SIGTERM and SIGHUP in the block until `stop_cleanly_on_termination` delivers
    them: a command that stops cleanly holds them from when it is chosen, so that one sent
    while its modules load (before it can install its handlers) stops it as one sent later
    does, where it used to end the process at once, without a word. The handlers from
    before are back after the block, and a signal still held there (the command ended
    without installing its own: a usage error) is sent again."""
    previous = {number: signal.getsignal(number) for number in _TERMINATION}
    _held.clear()
    for number in _TERMINATION:
        signal.signal(number, lambda signum, _frame: _held.append(signum))
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if _held:
            os.kill(os.getpid(), _held.pop(0))


@contextmanager
def stopped_with_summary(summary: Callable[[], str]) -> Iterator[None]:
    """Print ``summary()`` and exit 128 + the signal's number when Ctrl-C (130), SIGTERM (143)
    or SIGHUP (129, `stop_cleanly_on_termination`) stops the block, so that an interrupted
    run still says what it did (and an interruption is never exit status 1, a failure)."""
    try:
        yield
    except KeyboardInterrupt:
        status = 128 + signal.SIGINT
    except SystemExit as stop:
        if not (isinstance(stop.code, int) and stop.code > 128):
            raise
        status = stop.code
    else:
        return
    click.echo(f"{summary()}; stopped (exit status {status})", err=True)
    sys.exit(status)


@contextmanager
def open_report(
    path: Path | None,
    kept: Iterable[Path] = (),
    whose: str = "run",
    carried: Callable[[], Collection[str]] = frozenset,
    trees: Iterable[Path] = (),
    stdout_taken: bool = False,
    outputs: Iterable[Path] = (),
) -> Iterator[TextIO | None]:
    """The ``--report`` file opened for writing (UTF-8), or None without ``--report``; a
    clean CLI error when it cannot be written, and a usage error when it is one of `kept`
    (the `whose` inputs and outputs), which writing it would replace, inside one of `trees`
    (input directories), where the next run would read it as an input, or stdout where the
    run writes its output there (``stdout_taken``). Its directory must exist, or be one that
    one of the run's `outputs` goes into, at any depth: the run makes it, and so does the
    report.

    The report is written beside ``path`` and moved onto it when the block ends, however it
    ends (Ctrl-C included), with the records of the report already at ``path`` whose
    ``path`` field (a file's resolved absolute path) is one of ``carried()`` copied over:
    the documents this run did not write whose outputs are there (skipped, failed this time,
    or not reached before an interruption), so that the report always covers every output
    on disk. ``-``, ``/dev/stdout``, ``/dev/stderr`` and ``/dev/fd/N`` are written to that
    descriptor itself (where the shell points it, at its position), any other pipe or device
    as it opens, as the run goes, with nothing carried over.
    """
    if path is None:
        yield None
        return
    real = os.path.realpath(path)
    if real in {os.path.realpath(other) for other in kept}:
        raise click.UsageError(f"--report {path} is one of the {whose}'s inputs or outputs")
    for tree in trees:
        if real.startswith(os.path.join(os.path.realpath(tree), "")):
            raise click.UsageError(
                f"--report {path} is inside the input directory {tree}: it would be read as an input"
            )
    descriptor = _descriptor(path)
    if stdout_taken and descriptor == 1:
        raise click.UsageError(f"--report {path}: the {whose}'s output goes to stdout")
    straight = descriptor is not None or (path.exists() and not path.is_file())
    target = Path(real)  # through a symbolic link, as opening it would go
    if not (straight or target.parent.is_dir() or _holds_one_of(target.parent, outputs)):
        raise click.ClickException(f"cannot write the report {path}: no such directory {target.parent}")
    from producer.files import atomic_target

    in_body = False
    try:
        with ExitStack() as stack:
            if descriptor is not None:
                handle = stack.enter_context(os.fdopen(os.dup(descriptor), "w", encoding="utf-8"))
            elif straight:
                handle = stack.enter_context(path.open("w", encoding="utf-8"))
            else:
                temporary = stack.enter_context(atomic_target(target, always=True))
                handle = stack.enter_context(temporary.open("w", encoding="utf-8"))
            try:
                in_body = True
                yield handle
                in_body = False
            finally:
                if not straight:  # a stream has no earlier report to carry from
                    _carry_records(target, carried(), handle)
    except OSError as error:
        if in_body:  # not the report's: the run's own, raised through it
            raise
        raise click.ClickException(f"cannot write the report {path}: {error.strerror or error}") from None


def _holds_one_of(directory: Path, paths: Iterable[Path]) -> bool:
    """Whether one of `paths` lies in `directory` (resolved), at any depth."""
    return any(Path(os.path.realpath(path)).is_relative_to(directory) for path in paths)


def _descriptor(path: Path) -> int | None:
    """The file descriptor ``path`` names (``-`` and ``/dev/stdout`` 1, ``/dev/stderr`` 2,
    ``/dev/fd/N`` and ``/proc/self/fd/N`` N), or None."""
    named = {"-": 1, "/dev/stdout": 1, "/dev/stderr": 2}
    given = str(path)
    if given in named:
        return named[given]
    match = re.fullmatch(r"/(?:dev|proc/self)/fd/(\d+)", given)
    return int(match.group(1)) if match else None


def _carry_records(report: Path, documents: Collection[str], out: TextIO) -> None:
    """Copy to ``out`` the records of ``documents`` (resolved absolute paths) in the report at
    ``report`` (an earlier run's, if any); its lines that are not such records are left behind."""
    if not documents or not report.is_file():
        return
    try:
        earlier = report.open(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return
    except OSError as error:
        click.echo(
            f"warning: cannot read the earlier report {report} ({error.strerror}); "
            "the records of the outputs not written by this run are not carried over",
            err=True,
        )
        return
    with earlier:
        for line in earlier:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if (
                isinstance(record, dict)
                and isinstance(record.get("path"), str)
                and record["path"] in documents
            ):
                out.write(line if line.endswith("\n") else line + "\n")
