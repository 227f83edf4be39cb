"""Every default of the distributed path, in one place.

Each constant can be overridden by the environment variable named in its comment
(all with the ``TRANSQUEUE_`` prefix); `store.config.Settings.from_env` reads them.
"""

from __future__ import annotations

ENV_PREFIX = "TRANSQUEUE_"

#: TRANSQUEUE_REDIS_URL: the Redis server that is both the Celery broker and the job store.
#: One server for both matters: with AOF, a result written before its message was acked
#: is never lost while the ack survives (the log keeps their order).
REDIS_URL = "redis://localhost:6379/0"

#: TRANSQUEUE_BUNDLE: the exported model bundle directory; empty means the bundled demo model.
BUNDLE = ""

#: TRANSQUEUE_PRECISION: which ONNX weights of the bundle the workers load ("int8" or "fp32").
PRECISION = "int8"

#: TRANSQUEUE_THREADS: cores each worker process's Translator uses, as sentences decoded side
#: by side with one ONNX Runtime thread each. ORT does not see cgroup CPU limits, so this is
#: always set explicitly: a worker owning 2 cores runs the solo pool with 2 threads.
THREADS = 2

#: The most TRANSQUEUE_THREADS (and `transqueue translate --threads`) allowed: far above any
#: machine's cores, and each thread holds its own batch in memory, so a larger number is a
#: typo that would only exhaust memory or the system's threads.
MAX_THREADS = 1024

#: TRANSQUEUE_POOL: the Celery pool ("prefork", "solo" or "threads"), for `transqueue worker`
#: and `celery -A worker worker` alike. bench/results/pool.md: solo with 2 threads is as fast
#: as the best candidate and holds one copy of the model (docs/benchmarks.md, "A whole
#: worker", gives its peak with an opus-mt-sized int8 bundle), while prefork holds one copy
#: per process.
POOL = "solo"

#: TRANSQUEUE_CONCURRENCY: processes (prefork) or threads (threads pool) per worker; the solo
#: pool always runs one task at a time.
CONCURRENCY = 1

#: The most TRANSQUEUE_CONCURRENCY (and `transqueue worker --concurrency`) allowed: each
#: prefork process loads its own copy of the model (hundreds of MB), so no machine runs this
#: many; a larger number is a typo that would fork until memory runs out.
MAX_CONCURRENCY = 1024

#: TRANSQUEUE_QUEUE: the prefix of the Celery queues the translation chunks travel on, one per
#: model: `<QUEUE>.<model key>` (`store.queues.model_queue`).
QUEUE = "transqueue"

#: TRANSQUEUE_INBOX_QUEUE: the Celery queue of the scheduled inbox tasks (scan, deliver,
#: catch-up). Apart from the chunks, so that a delivery never waits behind every queued chunk.
#: Each app consumes its own queue only: the translation workers their model's chunk queue,
#: the scheduler this one (`store.queues.celery_config`).
INBOX_QUEUE = "transqueue.inbox"

#: TRANSQUEUE_CHUNK_SIZE: distinct sentences per task. A worker decodes a chunk's rows in
#: batches of `MAX_BATCH`, its threads side by side, so a chunk must hold a batch per thread
#: to keep every core busy: with 2 threads and batches of 8, 32 sentences translate about a
#: third faster than 16 did with batches of 32 (one batch, one core idle), in the same memory
#: (bench/results/pool.md; docs/benchmarks.md, "Chunk size, batch size and a worker's memory").
#: 32 sentences still take a few seconds with an opus-mt-sized int8 model, far below the
#: visibility timeout, and a crash repeats only that.
CHUNK_SIZE = 32

#: The most TRANSQUEUE_CHUNK_SIZE allowed. A chunk is one task message holding its sentences
#: (each at most `producer.defaults.PARAGRAPH_MAX_CHARS` characters), so 4096 sentences keep a
#: message under about 8 M characters, translated in minutes, well within the visibility
#: timeout; a chunk is also what a crash repeats.
MAX_CHUNK_SIZE = 4096

#: TRANSQUEUE_MAX_BATCH: most rows a worker's Translator decodes in one batch. Memory grows
#: with the rows in flight (about 2 MB a row with an opus-mt-sized model: the lm_head's
#: [rows, 65,001] buffers and the caches), speed with fuller batches: 8, two batches side by
#: side, keeps a whole worker at 224-231 MB and 110-125 sentences/s with chunks of 32; 16
#: gives 127-159 sentences/s at 254-255 MB, over the 250 MB target (2026-12-01 21:16;
#: docs/benchmarks.md, "Chunk size, batch size and a worker's memory").
#: `transqueue translate` runs in one process with no such budget and uses the Translator's
#: own default (32).
MAX_BATCH = 8

#: The most TRANSQUEUE_MAX_BATCH allowed: at about 2 MB a row in flight (opus-mt-sized), 1024
#: rows a batch is 2 GB per thread, far past any worker's memory budget. (A batch never holds
#: more rows than its chunk anyway.)
MAX_MAX_BATCH = 1024

#: TRANSQUEUE_MAX_DELIVERIES: strikes of one chunk (runs that died or raised; not Redis
#: outages) before its unfinished sentences are moved to the job's dead letters instead of
#: being retried again.
MAX_DELIVERIES = 3

#: The least TRANSQUEUE_MAX_DELIVERIES allowed: a chunk's first delivery translates it as one
#: batch, whose death says nothing of which sentence killed it; only a later delivery, which
#: runs one sentence at a time, can (`worker.chunks`).
MIN_MAX_DELIVERIES = 2

#: The most TRANSQUEUE_MAX_DELIVERIES allowed: each strike is a worker that died or a run that
#: raised on the same chunk, so a poison sentence may take down a worker this many times before
#: it is given up.
MAX_MAX_DELIVERIES = 100

#: TRANSQUEUE_VISIBILITY_TIMEOUT: seconds before Redis hands an unacknowledged chunk to another
#: worker (after its worker died). Must stay well above the longest chunk's runtime. The last
#: resort only: leases (below) requeue a dead worker's chunk within seconds.
VISIBILITY_TIMEOUT = 3600

#: TRANSQUEUE_LEASE_TTL: seconds a chunk's lease lives unless its worker's heartbeat renews it.
#: A worker that dies or stops loses its leases this long after its last heartbeat; the
#: chunk is requeued `LEASE_GRACE` later. Heartbeats come every `LEASE_TTL / 5` seconds.
LEASE_TTL = 10.0

#: Seconds a lease must stay missing before its chunk is requeued, so that live workers can
#: re-create the leases a Redis restart lost (they do at their next heartbeat).
LEASE_GRACE = 4.0

#: Seconds between two lease sweeps of a worker (and of the scheduler).
SWEEP_INTERVAL = 2.0

#: A worker announces the queue it consumes at each sweep, valid for this many sweeps: a
#: worker gone for that long no longer counts as serving its model.
PRESENCE_SWEEPS = 5

#: Seconds an unfinished job may make no progress (no sentence settled, no chunk delivered)
#: with nothing of it running and its queue empty before a sweeper sends its unsettled chunks
#: again: a Redis crash can lose a message that a worker had just popped and not yet run.
STALL_AFTER = 30.0

#: TRANSQUEUE_RESTORE_INTERVAL: seconds between a worker's sweeps for chunks whose
#: visibility timeout has passed.
RESTORE_INTERVAL = 10

#: TRANSQUEUE_RESULT_TTL: seconds a job (its documents, results, dead letters) is kept after
#: its last write or its end.
RESULT_TTL = 7 * 24 * 3600

#: TRANSQUEUE_TM_TTL: seconds a translation-memory entry is kept after it was last written.
TM_TTL = 30 * 24 * 3600

#: The longest duration any TRANSQUEUE_* setting in seconds may give (ten years): Redis refuses
#: an expiry that overflows its milliseconds, and a lease that long never runs out.
MAX_DURATION_S = 10 * 366 * 24 * 3600

#: TRANSQUEUE_MAX_MEMORY_PER_CHILD: KiB of resident memory after which a prefork child is
#: replaced once its current task ends (keeps each process under a 512 MB container limit);
#: 0: no limit (Celery's worker_max_memory_per_child, which billiard skips when it is 0).
MAX_MEMORY_PER_CHILD = 450_000

#: TRANSQUEUE_SCHEDULE: path of the scheduled inbox jobs file (TOML or JSON); empty: none.
SCHEDULE = ""

#: TRANSQUEUE_INBOX_LOCK_TIMEOUT: seconds an inbox run may hold its lock (a crashed run's lock
#: expires after this, and the entry's runs and deliveries wait until then). A live run
#: extends it every third of this, so it bounds only a crashed run's wait, not a run's length.
INBOX_LOCK_TIMEOUT = 120
#: The longest TRANSQUEUE_INBOX_LOCK_TIMEOUT allowed (a week): a lock whose expiry is further
#: off (or that has none) was set by no run, and is made to expire (`producer.inbox`).
MAX_INBOX_LOCK_TIMEOUT_S = 7 * 86400

#: Seconds a worker's or the scheduler's Redis client retries a lost connection (a Redis
#: restart, an AOF load) before the error reaches the task.
WORKER_PATIENCE = 60.0

#: TRANSQUEUE_CLIENT_PATIENCE: seconds `transqueue status`, `wait`, `fetch` and `jobs` wait for
#: Redis to come back (saying so once) before they give up with exit status 3.
CLIENT_PATIENCE = 120.0

#: Seconds the other commands (submit, cancel, ...) retry a lost connection.
IMPATIENCE = 2.0

#: TRANSQUEUE_POLL_INTERVAL: seconds between polls of `transqueue wait` and `fetch --follow`.
POLL_INTERVAL = 0.5

#: Seconds `transqueue wait` waits without any chunk of the job being taken or settled before
#: it says that no worker seems to be consuming the queue, and how to check.
NO_WORKER_HINT_AFTER = 30.0

#: Seconds between the plain progress lines of `transqueue wait` when stderr is no terminal.
PLAIN_PROGRESS_EVERY = 10.0

#: TRANSQUEUE_METRICS_PORT: port of the Prometheus exporter started by `transqueue metrics`.
METRICS_PORT = 9808

#: How long a finished job keeps its per-job series (sentences done, hits, dead letters) in
#: the metrics: an hour, enough for a dashboard to see it end. Jobs stay in Redis for
#: TRANSQUEUE_RESULT_TTL (7 days), and series for all of them would grow every scrape
#: by five a job. `transqueue_jobs` still counts every job by state.
METRICS_FINISHED_WINDOW_S = 3600

#: Redis key prefix of everything transqueue stores (besides Celery's own queue keys).
KEY_PREFIX = "tq"

#: The latest time a stored record (a job's, an inbox run's) may hold: 9999-12-31 23:59:59
#: UTC, the last that `time.gmtime` (and `transqueue jobs` and `runs`) can show.
LATEST_TIME = 253402300799.0

#: Runs kept per scheduled inbox entry: past this, the oldest finished runs are dropped (runs
#: whose job is still being translated are always kept).
RUNS_KEPT = 200

#: Oldest entries of the job index (``tq:jobs``) checked at each submit: those whose job
#: expired are removed, so the index stays near the number of live jobs without a TTL.
INDEX_PRUNED_PER_JOB = 10

#: Seconds the records of an inbox entry (its runs and the hashes of delivered and invalid
#: files) are kept after its last run; each run renews them. A removed entry's records go
#: away after it.
INBOX_RECORDS_TTL = 90 * 24 * 3600

#: Bytes of documents, windows and chunks a submit sends to Redis at a time (about a window of
#: a big file, or many small documents per round trip).
WRITE_BATCH_BYTES = 1 << 20

#: Chunks of a job read from Redis at a time: to send them once the job is stored, and by the
#: sweeper looking for a stalled job's unsettled chunks (so a big job is never read whole).
CHUNKS_READ_AT_ONCE = 1000

#: Errors kept per job (the newest).
ERRORS_KEPT = 100

#: Records of chunk messages set aside, the newest kept: chunks of no known job (expired, or
#: never created) and refused messages (`worker.messages`). A cancelled job's chunks are
#: skipped without one.
ORPHANS_KEPT = 1000

#: Characters of a refusal that an orphan record's reason keeps (the newest `ORPHANS_KEPT`
#: records are kept, with no expiry), and that the log line dropping its message shows.
ORPHAN_REASON_CHARS = 500

#: The longest translation of a sentence of c characters is
#: `MAX_TRANSLATION_CHARS_PER_SOURCE_CHAR` * c + `MAX_TRANSLATION_EXTRA_CHARS` characters; a
#: stored one that is longer (in a job's results, or in the translation memory) could not
#: have come from the model and is a corrupt record: Redis takes 512 MB in one value, and a
#: window renders one copy of a slot's translation per segment that uses it. The bound is
#: the worst case of the decoder's length cap (`models.defaults.LENGTH_A`, `LENGTH_B`), for
#: any input: a character becomes at most 18 after normalisation (NFKC's longest expansion,
#: U+FDFA; the demo bundle measured at most 6.5 source pieces per character, over every
#: code point repeated), so P <= 18c + 1 pieces, which split into parts of over 255 pieces
#: each but the last (`models.batching.split_points`), each part with its language token and
#: end of sentence decoded to at most 2(p + 2) + 16 tokens: 2.08P + 20 tokens in all. A
#: target piece decodes to at most 16 characters (SentencePiece's longest piece by default,
#: the demo vocabulary's longest), so at most 16 * (2.08 * (18c + 1) + 20) < 600c + 400
#: characters. Real translations are far shorter: the demo model's translations of 3000
#: Tatoeba sentences took at most 1.5 characters per source character (one hit the cap), and
#: of 169 hostile inputs (random code points, U+FDFA repeated; 7 hit the cap) none took 1%.
MAX_TRANSLATION_CHARS_PER_SOURCE_CHAR = 600

#: The constant part of the longest translation (`MAX_TRANSLATION_CHARS_PER_SOURCE_CHAR`).
MAX_TRANSLATION_EXTRA_CHARS = 400

#: Seconds a worker waits before it sends a chunk back to the queue because Redis answered
#: that it takes no writes for now (busy with a script, out of memory, a failed snapshot:
#: `store.connection.redis_away`): without the pause the message would go round in a tight loop.
#: The pause doubles for each chunk a worker process sends back so in a row, up to
#: `BUSY_REDIS_MAX_PAUSE_S`, and starts again from this once a chunk's run starts.
BUSY_REDIS_PAUSE_S = 1.0

#: The longest pause before a chunk goes back while Redis stays busy or out of memory.
BUSY_REDIS_MAX_PAUSE_S = 30.0

#: Seconds a worker whose chunk failed because Redis went away keeps trying to end the
#: chunk's run (`store.leases.held`) before the chunk goes back to the queue: a run entry
#: left behind reads as a worker's death, a strike, when the chunk runs again. The worker
#: takes no other chunk meanwhile (Redis is away: there is none to take); a stop ends the wait
#: (`store.connection.STOPPING`).
END_RUN_PATIENCE = 600.0

#: Characters of a refused value (a job id, a chunk number, an item) that an error message
#: quotes: a task message is untrusted and its values may be megabytes long.
QUOTED_CHARS = 80

#: TRANSQUEUE_TEST_POISON: test hook, off unless set: comma-separated "MODE:TEXT" items.
#: "raise:TEXT" makes every sentence that contains TEXT raise in the worker, "exit:TEXT" makes
#: the worker process exit on it, "sleep:TEXT" makes it take `POISON_SLEEP` seconds.
TEST_POISON = ""

#: Seconds a "sleep:TEXT" test poison holds its sentence (long enough to kill or stop the
#: worker mid-chunk in a test).
POISON_SLEEP = 6.0
