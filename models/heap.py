"""The C library's heap: glibc functions by name, and giving free heap memory back.

Loading a bundle parses JSON (the 65,001-piece vocabulary) and lets ONNX Runtime prepack
weights; what those free lies in the middle of the heap, where glibc keeps it unless
asked (`malloc_trim`). Elsewhere than on glibc these do nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable


def glibc_function(name: str) -> Callable[..., int] | None:
    """The C library's function `name`, or None where the C library does not have it."""
    library = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(library), name) if library else None
    except (OSError, AttributeError):
        return None


def trim_heap() -> bool:
    """Give the heap's free pages back to the system (glibc's `malloc_trim(0)`); whether
    any memory was released (False where the C library is not glibc)."""
    malloc_trim = glibc_function("malloc_trim")
    return bool(malloc_trim(0)) if malloc_trim is not None else False
