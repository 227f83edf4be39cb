"""Defaults for reading, segmenting and writing documents.

Each constant documents what it bounds; the ones read from the environment carry a
``TRANSQUEUE_`` prefix.
"""

from __future__ import annotations

import os

#: Longest logical paragraph (in characters) handed to pysbd in one piece. Longer paragraphs
#: are first cut at the last likely sentence end (or else the last space) before this length.
#: pysbd's run time grows badly with length on some inputs; the cap bounds each call.
PARAGRAPH_MAX_CHARS = 2000

#: Seconds one pysbd call may run before it is abandoned (its process is killed) and the
#: paragraph is split by the fallback splitter instead. Normal paragraphs take milliseconds.
PYSBD_TIMEOUT_S = float(os.environ.get("TRANSQUEUE_PYSBD_TIMEOUT", "5"))

#: Seconds allowed for starting the pysbd helper process (interpreter start + import).
PYSBD_STARTUP_TIMEOUT_S = 120.0

#: Characters pysbd uses internally as placeholders. A paragraph containing any of them is
#: segmented by the fallback splitter, because pysbd would turn them into other text. (The
#: list bullet "⁃" is not among them: pysbd splits "⁃9. … ⁃10. …" lists right, one of its
#: Golden Rules, and a piece that differs from the text is refused anyway.)
PYSBD_RESERVED_CHARS = frozenset("∯♟♝♨☝ƪᓰᓱᓳᓴᓷᓸ✂⎋☏☉☈☇☄∮ȹȸ⌬♭♬")

#: Shortest run of digits, commas, spaces and hyphens after ``.[`` that is sent to the fallback
#: splitter: pysbd's NUMBERED_REFERENCE_REGEX backtracks exponentially on such runs
#: (pysbd issues #76/#79; 8 groups of three digits already take seconds).
PYSBD_BRACKET_RUN_LIMIT = 16

#: Sentences of a job ordered by source token length together before they are cut into
#: chunks (`producer.chunking`): larger fills a worker's batches better, smaller keeps the
#: job closer to input order. 256 gave 7.9 rows a batch on demo dev sentences in 16-sentence
#: chunks, against 1.9 in input order.
CHUNK_SORT_WINDOW = 256

#: The deepest nesting of arrays and objects accepted in a JSONL record. Deeper records fail
#: with file:line:column before Python's json parser (recursive, about 1000 levels at most
#: depending on the caller's stack) would raise RecursionError; 256 leaves it room even in
#: the pure-Python parser, which takes two frames per level. Real records nest a few levels.
JSON_MAX_DEPTH = 256

#: Infix put before the suffix of an output file: ``report.md`` -> ``report.zh.md``.
OUTPUT_INFIX = ".zh"

#: Document formats by file suffix.
FORMAT_BY_SUFFIX = {
    ".txt": "txt",
    ".text": "txt",
    ".md": "md",
    ".markdown": "md",
    ".jsonl": "jsonl",
}
