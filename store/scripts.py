"""The Lua scripts of the job store: each runs atomically inside Redis.

A result or dead letter is written, counted and, for the last slot, the job finalized, in
one script, so a redelivered chunk or a retried write never counts twice and exactly one
write finalizes a job. `store.jobstore.JobStore` registers and calls them.

Redis does not roll back a script that fails part way: what it wrote before the error
stays. So every script does whatever can fail (a key of the wrong type, a counter that is
no integer, a run entry that is no JSON) before its first write, and refuses with an error
reply (`CHECKS`), having written nothing.
"""

from __future__ import annotations

# Checks a script makes before its first write; each returns what is wrong, or nil.
CHECKS = """
local function wrong_type(indexes, expected)
  for _, i in ipairs(indexes) do
    local actual = redis.call('TYPE', KEYS[i])['ok']
    if actual ~= 'none' and actual ~= expected then
      return 'WRONGTYPE ' .. KEYS[i] .. ' holds a ' .. actual .. ', not a ' .. expected .. ': nothing written'
    end
  end
end
local function not_counts(key, ...)
  local fields = {...}
  local values = redis.call('HMGET', key, ...)
  for i, v in ipairs(values) do
    if v and v ~= '0' and not (string.match(v, '^%-?[1-9]%d*$') and #v <= 18) then
      return 'ERR ' .. key .. ' field ' .. fields[i] .. ' is not an integer: nothing written'
    end
  end
end
"""

FINALIZE = (
    CHECKS
    + """
local function finalize(job, now)
  local h = redis.call('HMGET', job, 'total', 'done', 'dead', 'state')
  local done = tonumber(h[2] or '0')
  local dead = tonumber(h[3] or '0')
  if h[4] == 'cancelled' or done + dead < tonumber(h[1]) then return 0 end
  if redis.call('HSETNX', job, 'finished_at', now) == 0 then return 0 end
  if dead > 0 then redis.call('HSET', job, 'state', 'partial')
  else redis.call('HSET', job, 'state', 'done') end
  return 1
end
local function in_range(job, slot)
  local n, total = tonumber(slot), tonumber(redis.call('HGET', job, 'total') or '0')
  return n ~= nil and n == math.floor(n) and n >= 0 and n < total
end
local function settled_first(job, now)
  redis.call('HSETNX', job, 'started_at', now)
  if redis.call('HGET', job, 'state') == 'queued' then redis.call('HSET', job, 'state', 'running') end
end
local function expire_all(first, ttl)
  for i = first, #KEYS do redis.call('EXPIRE', KEYS[i], ttl) end
end
local function corrupt_job(hashes)
  return wrong_type(hashes, 'hash') or not_counts(KEYS[1], 'total', 'done', 'hits', 'dead')
end
-- The counters over all jobs (KEYS[4]) are statistics: where they are not a hash of integers
-- they are left as they are, and the job's write goes on.
local function stats_usable(...)
  return not (wrong_type({4}, 'hash') or not_counts(KEYS[4], ...))
end
"""
)

# KEYS: job, results, dead, stats, tm, capped, tm capped, then every job key to keep alive.
# ARGV: slot, text, hit (0/1), now, result_ttl, tm_ttl, capped (0/1: hit the length cap).
# Returns {written, finalized}; written is -1 when the job does not exist, -2 when the slot
# is not one of the job's (0 <= slot < total): nothing is written then. An error, and nothing
# written, when a hash or a counter of the job it writes holds something else (the memory's
# strings are SET, whatever they held; the overall stats, if corrupt, are left uncounted).
RECORD = (
    FINALIZE
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, 0} end
local corrupt = corrupt_job({1, 2, 3, 6})
if corrupt then return redis.error_reply(corrupt) end
local stats = stats_usable('translated', 'hits')
if not in_range(KEYS[1], ARGV[1]) then return {-2, 0} end
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then return {0, 0} end
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 0 then return {0, 0} end
redis.call('HINCRBY', KEYS[1], 'done', 1)
if ARGV[3] == '1' then
  redis.call('HINCRBY', KEYS[1], 'hits', 1)
  if stats then redis.call('HINCRBY', KEYS[4], 'hits', 1) end
elseif stats then
  redis.call('HINCRBY', KEYS[4], 'translated', 1)
end
redis.call('SET', KEYS[5], ARGV[2], 'EX', ARGV[6])
if ARGV[7] == '1' then
  redis.call('HSET', KEYS[6], ARGV[1], '1')
  redis.call('SET', KEYS[7], '1', 'EX', ARGV[6])
end
settled_first(KEYS[1], ARGV[4])
expire_all(8, ARGV[5])
return {1, finalize(KEYS[1], ARGV[4])}
"""
)

# KEYS: job, results, dead, stats, then every job key to keep alive.
# ARGV: slot, dead letter JSON, now, result_ttl. Returns (and refuses) as RECORD does.
DEAD = (
    FINALIZE
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, 0} end
local corrupt = corrupt_job({1, 2, 3})
if corrupt then return redis.error_reply(corrupt) end
local stats = stats_usable('dead')
if not in_range(KEYS[1], ARGV[1]) then return {-2, 0} end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return {0, 0} end
if redis.call('HSETNX', KEYS[3], ARGV[1], ARGV[2]) == 0 then return {0, 0} end
redis.call('HINCRBY', KEYS[1], 'dead', 1)
if stats then redis.call('HINCRBY', KEYS[4], 'dead', 1) end
settled_first(KEYS[1], ARGV[3])
expire_all(5, ARGV[4])
return {1, finalize(KEYS[1], ARGV[3])}
"""
)

# KEYS: job. ARGV: now. Finalizes a job whose slots are all settled (e.g. a job with none).
TRY_FINALIZE = (
    FINALIZE
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
return finalize(KEYS[1], ARGV[1])
"""
)


# A run entry of ``tq:running`` read back: its table, or nil for none or one that is not a
# JSON object (never written by a run: it is replaced or dropped, never trusted).
RUN_OF = """
local function run_of(entry)
  if not entry then return nil end
  local ok, run = pcall(cjson.decode, entry)
  if ok and type(run) == 'table' then return run end
  return nil
end
"""

# KEYS: job, running, lease, deliveries, strikes. ARGV: field, token, run JSON, lease ms,
# result_ttl, chunk, worker. Starts a run of a chunk: {0, 0} if the job is gone (nothing is
# created), {-1, 0} if a live run of the chunk holds its lease, else {1, strikes}. A run
# entry left by a run of another process whose lease expired means that run died
# mid-chunk: a strike for the chunk (a retry by the same process, after a Redis outage,
# is none; an entry that is no run's is replaced, no strike either). An error, and nothing
# written, when a hash or a counter it writes holds something else: a run entry and lease
# written before a failing count would make every later delivery of the chunk skip it as a
# duplicate of a live run.
START_RUN = (
    CHECKS
    + RUN_OF
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, 0} end
local corrupt = wrong_type({2, 4, 5}, 'hash') or not_counts(KEYS[4], ARGV[6]) or not_counts(KEYS[5], ARGV[6])
if corrupt then return redis.error_reply(corrupt) end
local previous = redis.call('HGET', KEYS[2], ARGV[1])
local died = false
if previous then
  if redis.call('EXISTS', KEYS[3]) == 1 then return {-1, 0} end
  local run = run_of(previous)
  died = run ~= nil and run.worker ~= ARGV[7]
end
if died then
  redis.call('HINCRBY', KEYS[5], ARGV[6], 1)
  redis.call('EXPIRE', KEYS[5], ARGV[5])
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('SET', KEYS[3], ARGV[2], 'PX', ARGV[4])
redis.call('HINCRBY', KEYS[4], ARGV[6], 1)
redis.call('EXPIRE', KEYS[4], ARGV[5])
return {1, tonumber(redis.call('HGET', KEYS[5], ARGV[6]) or '0')}
"""
)

# KEYS: running, lease. ARGV: field, token, lease ms. Renews the lease of a run that is still
# the chunk's current run (re-creating it after a Redis restart lost it); 0 otherwise, and 0
# for a run a sweeper has claimed as lost: its chunk is queued again, and a lease renewed by
# a run that woke up (SIGCONT) would make the requeued copy skip it as busy, so that if this
# run then died, its chunk would wait for the visibility timeout.
RENEW_LEASE = (
    RUN_OF
    + """
local run = run_of(redis.call('HGET', KEYS[1], ARGV[1]))
if not run or run.token ~= ARGV[2] or run.requeued then return 0 end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return 1
"""
)

# KEYS: running, lease. ARGV: field, token. Ends a run: its entry and lease go, if still its.
FINISH_RUN = (
    RUN_OF
    + """
local run = run_of(redis.call('HGET', KEYS[1], ARGV[1]))
if run and run.token == ARGV[2] then redis.call('HDEL', KEYS[1], ARGV[1]) end
if redis.call('GET', KEYS[2]) == ARGV[2] then redis.call('DEL', KEYS[2]) end
return 1
"""
)

# KEYS: running, lease, job. ARGV: field. Claims a run whose lease expired, for requeueing:
# returns {its entry, the job's chunk count} once (marking it requeued), or nil. Entries of
# gone jobs (or of a key that is no job) are dropped, and so are entries of finished or
# cancelled jobs (an entry claimed before is, too: nothing else removes it once its
# requeued copy was lost) and entries that are not a run's JSON: {the entry} then.
CLAIM_LOST = (
    RUN_OF
    + """
local entry = redis.call('HGET', KEYS[1], ARGV[1])
if not entry then return false end
if redis.call('TYPE', KEYS[3])['ok'] ~= 'hash' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return false
end
if redis.call('EXISTS', KEYS[2]) == 1 then return false end
if redis.call('HEXISTS', KEYS[3], 'finished_at') == 1 then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return false
end
local run = run_of(entry)
if not run then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return {entry}
end
if run.requeued then return false end
local chunks = redis.call('HGET', KEYS[3], 'chunks') or ''
run.requeued = true
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(run))
return {entry, chunks}
"""
)

# KEYS: job. ARGV: fingerprint. The job's fingerprint, set first if unset; nil (and nothing
# created) if the job is gone, so an expired job is never re-created as a hash without state.
CLAIM_FINGERPRINT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
redis.call('HSETNX', KEYS[1], 'fingerprint', ARGV[1])
return redis.call('HGET', KEYS[1], 'fingerprint')
"""

# KEYS: job. ARGV: now. Cancels an unfinished job. Cancelling and finalizing both claim
# 'finished_at' with HSETNX, so exactly one of them wins: a job that has just finished is
# never turned into a cancelled one, nor a cancelled one finalized.
CANCEL = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HSETNX', KEYS[1], 'finished_at', ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'state', 'cancelled')
return 1
"""
