"""models.heap: glibc's functions by name, and the heap trimmed after loading."""

from __future__ import annotations

import platform

import pytest

from models.heap import glibc_function, trim_heap


def test_a_missing_function_is_none():
    assert glibc_function("no_such_function_in_libc") is None


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_freed_heap_memory_goes_back_to_the_system():
    def rss_kb() -> int:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * 4

    # 64 MB of heap blocks (each under glibc's mmap threshold), every other one freed: the
    # holes lie between blocks still in use, where glibc keeps them until trimmed.
    blocks = [bytearray(64 << 10) for _ in range(1024)]
    blocks = blocks[::2]
    before = rss_kb()
    assert trim_heap()
    assert rss_kb() < before - 20_000
    del blocks
