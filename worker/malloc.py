"""glibc malloc settings for a worker process: one heap arena, and freed memory returned soon.

A worker runs many threads (Celery's, the Translator's sentence threads, ONNX Runtime's,
the lease heartbeat), and glibc gives threads that allocate at once malloc arenas of their
own, each keeping what was freed in it. The Translator's per-step arrays (logits, caches)
come and go in those threads, so their arenas fill up with freed memory. One arena, trimmed
once 1 MiB is free at its top, took a whole worker with an opus-mt-sized int8 bundle from
281 to 253 MB peak RSS over a 300-sentence job, at the same speed (bench/bench_pool.py,
2026-12-01; 265 MB with one arena alone).

glibc's own variables win: a worker started with MALLOC_ARENA_MAX or MALLOC_TRIM_THRESHOLD_
set keeps what they say. Elsewhere than on glibc this does nothing.
"""

from __future__ import annotations

import os

from models.heap import glibc_function

#: mallopt parameters (glibc's malloc.h).
M_TRIM_THRESHOLD, M_ARENA_MAX = -1, -8

#: Heap arenas for the whole process.
ARENAS = 1

#: Free bytes at the top of the heap beyond which glibc gives memory back to the system.
TRIM_THRESHOLD = 1 << 20

#: (mallopt parameter, value, the glibc variable that overrides it).
SETTINGS = (
    (M_ARENA_MAX, ARENAS, "MALLOC_ARENA_MAX"),
    (M_TRIM_THRESHOLD, TRIM_THRESHOLD, "MALLOC_TRIM_THRESHOLD_"),
)


def tune_malloc() -> list[str]:
    """Apply `SETTINGS` with mallopt, before the worker starts its threads; returns the names
    of those applied (none where the C library is not glibc or the variable is set)."""
    mallopt = glibc_function("mallopt")
    if mallopt is None:
        return []
    applied = []
    for parameter, value, variable in SETTINGS:
        if variable not in os.environ and mallopt(parameter, value) == 1:
            applied.append(variable)
    return applied
