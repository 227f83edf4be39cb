"""The error of a stored record that is not what transqueue writes, shared by the job store
and the inbox run records (`store.runs`, which the job store imports), the checks that
what a record holds is text, and that text as a message may show it (`printable`)."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from store import defaults

#: What a terminal may act on rather than show: the C0 and C1 controls and DEL (escape
#: sequences, carriage returns, new lines), the line and paragraph separators, and the bidi
#: marks, embeddings, overrides and isolates, which reorder what follows them on the line.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


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


def expect_str(value: object) -> str:
    """`value` if it is a string; TypeError otherwise (a text field of a stored record)."""
    if not isinstance(value, str):
        raise TypeError(f"{value!r:.80} is not a string")
    return value


def is_time(value: object) -> bool:
    """Whether `value` is a time a record may hold (seconds since the epoch): a number, not a
    bool, from 0 to `defaults.LATEST_TIME` (not NaN, infinite, or beyond what `time.gmtime`
    shows)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 <= value <= defaults.LATEST_TIME
    )


def is_text(value: str) -> bool:
    """Whether `value` is text (`check_text`): a file name read from the disk holds lone
    surrogates where its bytes are not UTF-8, as a value read from Redis does."""
    try:
        check_text(value)
    except ValueError:
        return False
    return True


def printable(value: str) -> str:
    """`value` for a message or a terminal: its control characters (`_CONTROLS`) written as
    Python writes them in a string literal (``\\x1b``, ``\\n``, ``\\u202e``), and its lone
    surrogates as ``\\udcXX``; any other text, Chinese or a file name's spaces, as it is.
    Text read from Redis may hold what a terminal would obey (README, "Security: what is
    trusted"): every line that quotes it is shown through this."""
    if value.isprintable():  # no control, format character or surrogate: most text
        return value
    escaped = _CONTROLS.sub(lambda found: found.group().encode("unicode_escape").decode("ascii"), value)
    return escaped.encode("utf-8", "backslashreplace").decode("utf-8")


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
