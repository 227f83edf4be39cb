"""Defaults for reading, segmenting and writing documents.

Each constant documents what it bounds; the ones read from the environment carry a
``TRANSQUEUE_`` prefix.
"""

from __future__ import annotations

import math
import os


def _env_number(
    name: str, default: int | float, least: int | float, most: int | float = math.inf
) -> int | float:
    """The number in environment variable `name` (of `default`'s type, from `least` to
    `most`), or `default` when it is unset or empty. A bad value stops the process with one
    line naming the variable: these are read at import, before any command can report it."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = type(default)(raw)
    except ValueError:
        value = None
    if value is None or not math.isfinite(value) or not least <= value <= most:
        kind = "a whole number" if isinstance(default, int) else "a number"
        bounds = f"at least {least}" if math.isinf(most) else f"{least} to {most}"
        raise SystemExit(f"Error: {name}={raw!r}: expected {kind}, {bounds}")
    return value


#: Longest logical paragraph (in characters) handed to pysbd in one piece. Longer paragraphs
#: are first cut at the last likely sentence end (or else the last space) before this length.
#: pysbd's run time grows badly with length on some inputs; the cap bounds each call.
PARAGRAPH_MAX_CHARS = 2000

#: Seconds one pysbd call may run before it is abandoned (its process is killed) and the
#: paragraph is split by the fallback splitter instead. Normal paragraphs take milliseconds;
#: at most an hour (the wait for its answer cannot be longer than the system's time_t).
PYSBD_TIMEOUT_S = _env_number("TRANSQUEUE_PYSBD_TIMEOUT", 5.0, 0.1, 3600.0)

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

#: TRANSQUEUE_MAX_LINE_BYTES: the longest line of an input file, and the longest stdin unit (a
#: line, or with --reflow a paragraph), in bytes without its \n (the \r of a CRLF counts;
#: 1 MiB). Reading stops at the first line over it, which fails its file naming file:line. Real documents have
#: lines of a few kB at most, and segmenting one 1 MB line already takes about 7 s.
MAX_LINE_BYTES = _env_number("TRANSQUEUE_MAX_LINE_BYTES", 1 << 20, 1)

#: TRANSQUEUE_MAX_BLOCK_BYTES: the longest stretch of a Markdown file where a window cannot end,
#: in bytes (4 MiB): a paragraph (or a list item's, or a quote's), a fenced code or HTML block,
#: with no blank line outside them nor a heading, list item or table row to start the next
#: window at; and the longest ``--reflow`` paragraph of a file. A window grows to hold one of
#: these (``producer.streaming``); a longer one fails its file, naming file:line where it
#: starts. No file is read whole, so memory stays flat whatever the size of a file. The
#: biggest windows cost the most: 50 MB of --reflow paragraphs of 4 MB each peak at 183 MB in
#: `translate` and 242 MB in `submit`, of 7 MB each at 294 and 350 MB (ordinary Markdown: 92
#: and 135 MB; bench/results/inputs.md), so 4 MiB, not 8.
MAX_BLOCK_BYTES = _env_number("TRANSQUEUE_MAX_BLOCK_BYTES", 4 << 20, 1)

#: Front matter (``---`` or ``+++`` on a Markdown file's first line) is only front matter if
#: its closing line starts within this many characters; else the first line is a thematic
#: break. Real front matter is a few hundred bytes; the bound lets a file's first window know
#: where its front matter ends without reading further (``producer.formats.markdown``).
FRONT_MATTER_MAX_CHARS = 1 << 16

#: TRANSQUEUE_MAX_FILE_BYTES: the largest input file, in bytes after decompression (64 GiB).
#: Every file is streamed, so memory does not depend on it; it stops a runaway input (a file
#: still being written, a decompression bomb, a corpus that `submit` would pour into Redis)
#: as soon as its bytes pass it, failing that file with a message that names it. Real
#: corpora stay far below it; Parquet files are read by row group and not counted.
MAX_FILE_BYTES = _env_number("TRANSQUEUE_MAX_FILE_BYTES", 64 << 30, 1)

#: Seconds an inbox file must have stayed unchanged (its size and mtime) before a scan takes it,
#: unless its schedule entry says otherwise (``settle``): a file still being copied or
#: uploaded into the inbox is left for a later run. 3 s is above the 2 s mtime granularity of
#: FAT file systems and well within any scan interval (`producer.inbox`).
INBOX_SETTLE_S = 3.0

#: Seconds between two checks of the scheduler for finished inbox jobs left undelivered (their
#: deliver task lost with a killed worker or a crashed Redis, or their delivery put off by an
#: entry lock a crashed run left): such a job reaches its outbox within this, not at its entry's
#: next run, a day later for a daily one. A check with nothing to deliver only reads the run
#: records (`producer.inbox.deliver_finished`).
INBOX_CATCHUP_INTERVAL_S = 60.0

#: Bytes read from an input file at a time; each piece is checked against MAX_LINE_BYTES as it
#: arrives, so a file made of one endless line is refused after about this much more.
READ_CHUNK_BYTES = 1 << 20

#: Bytes of a text file (``producer.streaming``) read, parsed, translated and written at a time,
#: cut after a whole record (for Markdown and ``--reflow`` text, where no block is open: see
#: MAX_BLOCK_BYTES); `submit` stores a file as windows of this size
#: (``producer.jobs``) and `fetch` renders them one at a time. Each window's distinct sentences
#: go to the model in one call, so a window should hold a few thousand sentences for full
#: batches; memory is a few times this, whatever the size of the file.
STREAM_WINDOW_BYTES = 1 << 20

#: Distinct sentences (with their translations) `transqueue translate` remembers in a run, the
#: most recent ones: a sentence repeated within them is translated once. Bounds the memory of
#: a run over a big corpus (a few hundred bytes an entry: about 50 MB). `submit` remembers as
#: many of a job's sentences (with their slots) to send a repeated one once.
TRANSLATION_MEMORY_ENTRIES = 100_000

#: Characters of an output text encoded and written at a time (``producer.files.write_atomic``),
#: so that the UTF-8 bytes of a big document are never held all at once next to its text.
WRITE_CHUNK_CHARS = 1 << 20

#: The longest file name, in bytes, where the file system does not say
#: (``os.pathconf(DIR, "PC_NAME_MAX")``): an output's temporary name is cut to fit it.
NAME_MAX = 255

#: Bytes of a document's quality-flag records (``producer.quality.FlagLog``) held in memory
#: until the document is written; past this they wait in a temporary file.
PENDING_RECORDS_BYTES = 1 << 20

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
    ".csv": "csv",
    ".tsv": "tsv",
    ".parquet": "parquet",
}

#: Compression suffixes accepted after a format suffix (``corpus.jsonl.zst``; not on
#: ``.parquet``, which is compressed inside): the file is
#: decompressed as it is read and its translation is written compressed the same way.
COMPRESSION_SUFFIXES = (".gz", ".zst")

#: Compressed bytes of a ``.zst`` input decompressed at a time: zstd inflates at most about
#: 32,000 times, so one piece never becomes more than about 64 MiB, and usually a few MiB.
ZSTD_FEED_BYTES = 2048

#: zstd level of compressed outputs (zstd's own default: fast, and near gzip -9 in size).
ZSTD_LEVEL = 3

#: Field delimiter of each delimited-table format (RFC 4180 quoting for both).
DELIMITERS = {"csv": ",", "tsv": "\t"}
#: Top-level domains that make a bare dotted name (``pulse.cio.gov``, ``example.com/docs``) a
#: protected domain (`producer.protect`). A closed list, so that abbreviations and file names
#: with other suffixes ("e.g.", "config.yaml") are not taken for domains. Written in lower
#: case; matched in lower or upper case (``.com``, ``.COM``), not capitalised (``big.It``).
PROTECTED_TLDS = (
    "com|org|net|gov|edu|mil|int|io|dev|app|ai|info|biz|co|me|us|uk|eu|de|fr|cn|jp|ru|in|ca|"
    "au|nl|ch|se|no|it|es|tv|xyz|site|online|tech|cloud"
)

#: A sentence whose letters are more than this fraction CJK (Han, kana, hangul; each other
#: letter counts one) is already in the target script: it is copied to the output, not
#: translated. 0.3: "你好，世界。" (1.0) and "我用 Python 写代码。" (5 of 11 letters, 0.45) are
#: copied; an English sentence naming a Chinese person ("My friend 李明 lives in Beijing.",
#: 2 of 25, 0.08) is translated, the name kept as a protected span.
PASS_THROUGH_CJK_RATIO = 0.3

#: TRANSQUEUE_PROTECT: extra protected-span patterns (Python regular expressions), one per
#: line, added to those of ``--protect``. Empty by default.
PROTECT_PATTERNS = tuple(p for p in os.environ.get("TRANSQUEUE_PROTECT", "").splitlines() if p.strip())

#: Longest template tag (``{{ … }}``, ``{% … %}``, ``{# … #}``) recognised, in characters; bounds
#: the search for its closing braces on a long line.
TEMPLATE_TAG_MAX_CHARS = 1000

#: Quality flags (`producer.quality`), measured on the demo model's outputs and on the 29,155
#: human translations of ../shared/data/en-zh/cmn_hans.txt (Tatoeba).
#:
#: ``ratio``: the output/source length ratio, in characters other than whitespace, outside
#: this band. Human Chinese translations of English sentences of 20 or more such characters
#: have a ratio of 0.37 (median); 0.5% are under 0.19 and 0.5% over 0.63, and the band flags
#: 19 of those 21,661 pairs. The demo model's outputs that hit the length cap on prose (the
#: project's READMEs) have a median of 1.15, and 5% of its other outputs there, mostly
#: truncated ones, fall under 0.11.
RATIO_BAND = (0.15, 0.8)

#: Shortest source (characters other than whitespace) whose length ratio is checked: on
#: shorter ones one word more or less moves the ratio out of any useful band.
RATIO_MIN_SOURCE_CHARS = 20

#: ``repeat``: a unit of 1 to REPEAT_MAX_UNIT characters (no whitespace, no digit, at least
#: one letter or ideograph) repeated at least REPEAT_MIN_TIMES times in a row (whitespace
#: allowed between). No human translation of the Tatoeba file has one (Chinese doubles a
#: character, "谢谢", or a word, "研究研究", but does not repeat it four times); 2% of the demo
#: model's outputs on Tatoeba sentences and 31% on prose do. Digit loops ("18888888") are
#: left to the ``digits`` flag, so that "1000000" is no loop.
REPEAT_MAX_UNIT = 8
REPEAT_MIN_TIMES = 4

#: ``digits``: whole numbers up to this value are ignored on both sides, because a Chinese
#: translation may write them in characters ("3 apples" -> "三个苹果", "1st" -> "第一") and an
#: English number word may come back as digits. The flag still fires on 0.4% of the Tatoeba
#: human translations (119 of 29,155: times, "7:45" -> "七点四十五分"; "thirty" -> "30"), and
#: on 135 of 668 demo model outputs for the sentences of the project's READMEs.
DIGITS_IGNORED_MAX = 10
