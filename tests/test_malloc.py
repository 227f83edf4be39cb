import os
import subprocess
import sys

from worker.malloc import SETTINGS

PROBE = "from worker.malloc import tune_malloc; print(','.join(tune_malloc()))"


def applied(env: dict[str, str]) -> list[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True, text=True, check=True
    )
    return [name for name in out.stdout.strip().split(",") if name]


def test_a_worker_process_gets_one_malloc_arena_and_prompt_trimming():
    assert applied({}) == [variable for _, _, variable in SETTINGS]


def test_glibc_s_own_variables_win():
    assert applied({"MALLOC_ARENA_MAX": "4"}) == ["MALLOC_TRIM_THRESHOLD_"]
    assert applied({"MALLOC_ARENA_MAX": "4", "MALLOC_TRIM_THRESHOLD_": "0"}) == []
