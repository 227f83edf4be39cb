"""cli: the lazy command group names every command of every command module, and only those;
an option's usage error names the variable only when its value came from it."""

from __future__ import annotations

import importlib
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from cli import COMMAND_MODULES, main
from cli.common import VariableOption


def test_each_command_module_defines_exactly_the_commands_mapped_to_it():
    for module_name in set(COMMAND_MODULES.values()):
        module = importlib.import_module(module_name)
        mapped = {name for name, owner in COMMAND_MODULES.items() if owner == module_name}
        assert {command.name for command in module.COMMANDS} == mapped, module_name


def test_an_unknown_command_is_a_usage_error():
    assert main.get_command(None, "no-such-command") is None
    done = subprocess.run(
        [sys.executable, "-c", "from cli import main; main()", "no-such-command"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "No such command 'no-such-command'" in done.stderr
    assert "Traceback" not in done.stderr


def _modules_loaded_with(command: str) -> str:
    """The names of the modules a fresh interpreter holds once `command` is looked up."""
    probe = (
        f"import sys; from cli import main; main.get_command(None, {command!r}); print(sorted(sys.modules))"
    )
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout


def test_the_worker_command_does_not_import_the_producer():
    loaded = _modules_loaded_with("worker")
    assert "'producer.jobs'" not in loaded and "'tqdm'" not in loaded and "'prometheus_client'" not in loaded


def test_the_worker_and_translate_commands_import_neither_celery_nor_redis_before_they_run():
    # the worker starts loading its model before it imports them; translate never needs them
    for command in ("worker", "translate"):
        loaded = _modules_loaded_with(command)
        assert "'celery'" not in loaded and "'redis'" not in loaded and "'kombu'" not in loaded, command


def test_only_a_refusal_for_good_stops_a_long_running_command(tmp_path):
    # a worker waits out a Redis that is down or busy (MISCONF here: a failed snapshot), and
    # stops at once only for what no wait changes (a database index out of range)
    import shutil
    import time

    import click
    import pytest
    from distributed_support import RedisServer

    from cli.common import EXIT_REDIS, refuse_bad_credentials
    from store.config import Settings

    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        client = server.client()
        client.config_set("save", "3600 1")
        client.set("a", "1")
        shutil.rmtree(tmp_path / "redis")  # its snapshot can no longer be written
        client.bgsave()
        deadline = time.monotonic() + 30
        while client.info("persistence")["rdb_last_bgsave_status"] != "err":
            assert time.monotonic() < deadline, "the snapshot never failed"
            time.sleep(0.05)
        with click.Context(click.Command("worker")):
            refuse_bad_credentials(Settings(redis_url=server.url))  # MISCONF: returns
            with pytest.raises(click.exceptions.Exit) as stopped:
                refuse_bad_credentials(Settings(redis_url=server.url.replace("/0", "/99")))
        assert stopped.value.exit_code == EXIT_REDIS
    finally:
        server.kill()


def test_the_count_options_have_the_settings_bounds():
    from click.testing import CliRunner

    for args in (["translate", "--threads", "1025", "-"], ["worker", "--concurrency", "1025"]):
        result = CliRunner().invoke(main, args, input="")
        assert result.exit_code == 2 and "1025 is not in the range 1<=x<=1024" in result.output, args


def test_every_option_read_from_a_variable_says_where_a_bad_value_came_from():
    ctx = click.Context(main)
    for name in main.list_commands(ctx):
        for param in main.get_command(ctx, name).params:
            if isinstance(param, click.Option) and param.envvar:
                assert isinstance(param, VariableOption), (name, param.name)


@pytest.mark.parametrize(
    ("option", "variable", "bad", "good", "message"),
    [
        ("--threads", "TRANSQUEUE_THREADS", "0", "2", "0 is not in the range 1<=x<=1024."),
        ("--precision", "TRANSQUEUE_PRECISION", "int4", "fp32", "'int4' is not one of 'int8', 'fp32'."),
    ],
)
def test_a_bad_value_names_the_variable_only_when_it_came_from_it(option, variable, bad, good, message):
    # the variable set (to a good value) and the option given: the bad value is the option's
    given = CliRunner().invoke(main, ["translate", option, bad, "-"], input="", env={variable: good})
    assert given.exit_code == 2
    assert given.output.splitlines()[-1] == f"Error: Invalid value for '{option}': {message}"
    assert variable not in given.output
    read = CliRunner().invoke(main, ["translate", "-"], input="", env={variable: bad})
    assert read.exit_code == 2
    assert read.output.splitlines()[-1] == (
        f"Error: Invalid value for {variable} (environment variable of '{option}'): {message}"
    )
    shown = CliRunner().invoke(main, ["translate", "--help"], env={variable: None})
    assert f"[env var: {variable};" in " ".join(shown.output.split())  # help still names it


def test_the_variable_named_is_the_one_read():
    @click.command(context_settings={"auto_envvar_prefix": "T"})
    @click.option("--count", type=click.IntRange(1), cls=VariableOption, envvar=["T_FIRST", "T_SECOND"])
    @click.option("--size", type=click.IntRange(1), cls=VariableOption)
    def command(count: int | None, size: int | None) -> None:
        """Nothing."""

    for env, said in (
        ({"T_FIRST": "", "T_SECOND": "0"}, "T_SECOND (environment variable of '--count')"),
        ({"T_SIZE": "0"}, "T_SIZE (environment variable of '--size')"),
    ):
        result = CliRunner().invoke(command, [], env=env)
        assert result.exit_code == 2 and f"Error: Invalid value for {said}:" in result.output, env
