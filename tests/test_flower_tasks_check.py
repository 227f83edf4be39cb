"""deploy/flower_tasks_check.py: what compose-check.sh accepts as Flower's view of a job."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "deploy" / "flower_tasks_check.py"
JOB = "3caaf1170a32"
LINES = ["It's true, and Tom swam.", 'He said "no", and Kiss me.']


def check(tmp_path: Path, shown: str, name: str = "tasks.json") -> subprocess.CompletedProcess[str]:
    """Run the checker on ``shown`` against a document of LINES."""
    (tmp_path / name).write_text(shown, encoding="utf-8")
    (tmp_path / "doc.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / name), str(tmp_path / "doc.txt"), JOB],
        capture_output=True,
        text=True,
    )


def api_tasks(args: str) -> str:
    """Flower's /api/tasks answer with one translate_chunk task whose args are ``args``."""
    return json.dumps({"u1": {"name": "transqueue.translate_chunk", "args": args, "result": None}})


def test_summaries_without_source_text_pass(tmp_path: Path) -> None:
    result = check(tmp_path, api_tasks(f"job={JOB} chunk=7 sentences=16"))
    assert result.returncode == 0, result.stdout
    assert f"1 chunk summaries like 'job={JOB} chunk=7 sentences=16'" in result.stdout


@pytest.mark.parametrize("line", LINES)
def test_a_source_line_in_the_json_fails(tmp_path: Path, line: str) -> None:
    result = check(tmp_path, api_tasks(f"job={JOB} chunk=7 sentences=1 [[3, {line!r}]]"))
    assert result.returncode == 1
    assert "source text shown" in result.stdout


def test_a_source_line_behind_html_entities_fails(tmp_path: Path) -> None:
    page = f"<td>job={JOB} chunk=1 sentences=2</td><td>It&#39;s true, and Tom swam.</td>"
    result = check(tmp_path, page, "tasks.html")
    assert result.returncode == 1
    assert "It's true, and Tom swam." in result.stdout


def test_no_summary_of_the_job_fails(tmp_path: Path) -> None:
    result = check(tmp_path, api_tasks("['ab12', 7, [[0, 'x']]]"))
    assert result.returncode == 1
    assert f"no 'job={JOB} chunk=… sentences=…' summary" in result.stdout
