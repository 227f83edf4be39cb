"""The error of a stored record that is not what transqueue writes, shared by the job store
and the inbox run records (`store.runs`, which the job store imports), and the checks that
what a record holds is text."""

from __future__ import annotations

import json
from typing import Any


class CorruptRecord(ValueError):
    """A stored record that is not what transqueue writes (written by someone else, or by a
    different version); the message names the key."""


def check_text(value: str) -> str:
    """`value` if it is text; ValueError if it holds a lone surrogate: bytes that were not
    UTF-8 in Redis (the client decodes them with ``surrogateescape``, `store.connection`) or
    an escape that spells one. The error's message holds no surrogate itself."""
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as error:
            raise ValueError(f"not UTF-8 text (character {error.start})") from None
    return value


def is_text(value: str) -> bool:
    """Whether `value` is text (`check_text`): a file name read from the disk holds lone
    surrogates where its bytes are not UTF-8, as a value read from Redis does."""
    try:
        check_text(value)
    except ValueError:
        return False
    return True


def printable(value: str) -> str:
    """`value` for a message, its lone surrogates written as ``\\udcXX`` escapes."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def load_json(raw: str) -> Any:
    """A stored JSON record parsed; ValueError if it is not JSON or not text, a string in it
    included (`check_text`), or nested too deeply for the parser (which raises
    RecursionError, that no reader of a record would catch)."""
    try:
        data = json.loads(check_text(raw))
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if "\\u" in raw:  # an escape may spell a lone surrogate
        check_text(json.dumps(data, ensure_ascii=False))
    return data
