"""Print a benchmark's Markdown table and, on request, append it to a results file."""

from __future__ import annotations

import time
from pathlib import Path


def publish(table: str, record: Path | None, title: str = "") -> None:
    """Print `table`; with `record`, append it under a UTC-stamped heading (plus `title`)."""
    print(table)
    if record is not None:
        stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        heading = f"{stamp}: {title}" if title else stamp
        with record.open("a", encoding="utf-8") as handle:
            handle.write(f"\n## {heading}\n\n{table}\n")
