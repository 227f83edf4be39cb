"""Check what Flower shows of a job's chunk tasks (deploy/compose-check.sh runs it).

    python3 deploy/flower_tasks_check.py SHOWN DOCUMENT JOB

SHOWN is Flower's /api/tasks JSON or its tasks page as rendered by headless Chromium
(--dump-dom). Passes when it shows the job's chunks as ``job=JOB chunk=N sentences=M`` and
holds no line of DOCUMENT (8 characters or more); prints one line saying what it saw.
Standard library only: it runs on the host, outside the image.
"""

from __future__ import annotations

import html
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

#: Shorter lines could occur in Flower's own text by chance.
MIN_LEAK_CHARS = 8


def strings(value: object) -> Iterator[str]:
    """Every string in a decoded JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def visible_text(raw: str) -> str:
    """The text a reader of ``raw`` sees: JSON strings, or HTML with entities decoded."""
    try:
        return "\n".join(strings(json.loads(raw)))
    except ValueError:
        return html.unescape(raw)


def main(shown: Path, document: Path, job: str) -> int:
    """Check ``shown`` against ``document``'s lines and ``job``; 0 when it passes."""
    text = visible_text(shown.read_text(encoding="utf-8"))
    summaries = re.findall(rf"job={re.escape(job)} chunk=\d+ sentences=\d+", text)
    lines = document.read_text(encoding="utf-8").splitlines()
    leaks = [line for line in lines if len(line.strip()) >= MIN_LEAK_CHARS and line.strip() in text]
    if not summaries:
        print(f"FAIL: {shown.name}: no 'job={job} chunk=… sentences=…' summary shown")
        return 1
    if leaks:
        print(f"FAIL: {shown.name}: source text shown, e.g. {leaks[0]!r} ({len(leaks)} lines)")
        return 1
    print(f"{len(summaries)} chunk summaries like {summaries[0]!r}, no source line")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]))
