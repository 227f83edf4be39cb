"""The error of a stored record that is not what transqueue writes, shared by the job store
and the inbox run records (`store.runs`, which the job store imports)."""

from __future__ import annotations


class CorruptRecord(ValueError):
    """A stored record that is not what transqueue writes (written by someone else, or by a
    different version); the message names the key."""
