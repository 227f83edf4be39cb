"""cli: the lazy command group names every command of every command module, and only those."""

from __future__ import annotations

import importlib
import subprocess
import sys

from cli import COMMAND_MODULES, main


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


def test_the_worker_command_does_not_import_the_producer():
    probe = "import sys; from cli import main; main.get_command(None, 'worker'); print(sorted(sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert "'producer.jobs'" not in loaded and "'tqdm'" not in loaded and "'prometheus_client'" not in loaded
