-- publish.lua: add N new jobs, all or none (duplicate tags write nothing).
--
-- KEYS[1] ready     ZSET   KEYS[2] delayed  ZSET   KEYS[3] body   HASH
-- KEYS[4] meta      HASH   KEYS[5] ctr      HASH   KEYS[6] notify LIST
-- KEYS[7] stats     HASH   KEYS[8] dead     ZSET   KEYS[9] leased ZSET
-- KEYS[10] wait     ZSET (read only to name a clash with a job waiting for its parents)
-- ARGV[1] mode ('strict' | 'tstrict' | 'aging' | 'fair')   ARGV[2] aging_us (µs one priority step is worth)
-- ARGV[3] notify_cap                    ARGV[4] n (jobs in this call, 1..100)
-- ARGV[5 + 10*(i-1) ..] per job i:
--   id, body, priority, score ('' = computed), delay_ms ('' = none),
--   run_at_ms ('' = none; absolute, Redis TIME), max_retries, visibility_ms ('' = queue's),
--   group ('' = none), weight ('' = 1; used by mode 'fair')
-- Raises ZQ_BAD_ARGUMENT (nothing written) for a job whose arguments are out of bounds.
-- Returns: {0} written; or {1, id, state, id, state, ...} for the tags already in use
--          (state: ready | delayed | leased | dead | waiting | batch), nothing written.
-- Work: O(n log N), in a constant number of Redis commands (multi-field HMGET, HSET and
--   ZADD) plus up to 4 ZSCOREs per clashing tag.

--@include now_ms
--@include new_job
--@include tag_state
--@include ready_scores
--@include series
--@include notify

local k = {ready = KEYS[1], delayed = KEYS[2], body = KEYS[3], meta = KEYS[4], ctr = KEYS[5],
  notify = KEYS[6], stats = KEYS[7], dead = KEYS[8], leased = KEYS[9], wait = KEYS[10]}
local mode, aging_us, cap, n = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])

-- 0. every job's arguments within bounds (Python checked them; this keeps a bad caller
-- from writing a record that other scripts would refuse)
local now = now_ms()
local records, runs = {}, {} -- each job's record and run-at, read once
for i = 1, n do
  local meta, run_at, why = read_job(ARGV, 5 + 10 * (i - 1), now)
  if why then
    error('ZQ_BAD_ARGUMENT: job ' .. i .. ': ' .. why)
  end
  records[i], runs[i] = meta, run_at
end

-- 1. every tag must be free: one HMGET for all, the state only of those in use
local ids = {}
for i = 0, n - 1 do
  ids[i + 1] = ARGV[5 + 10 * i]
end
local clash = tags_in_use(k, ids)
if clash then
  return clash
end

-- 2. records and where each job goes
local bodies, metas, later = {}, {}, {}
local queued = {} -- {id, meta} of jobs ready now, in call order
for i = 0, n - 1 do
  local b = 5 + 10 * i
  local id = ARGV[b]
  local meta, run_at = records[i + 1], runs[i + 1]
  bodies[#bodies + 1] = id
  bodies[#bodies + 1] = ARGV[b + 1]
  metas[#metas + 1] = id
  metas[#metas + 1] = cjson.encode(meta)
  if run_at and run_at > now then
    later[#later + 1] = run_at
    later[#later + 1] = id
  else
    queued[#queued + 1] = {id, meta}
  end
end
-- 3. ready scores first (a spent sequence raises before anything is written), as
-- ready_score() would give them job by job, with one counter update
local scored = nil
if #queued > 0 then
  scored = ready_scores(k.ctr, queued, mode, aging_us)
end
redis.call('HSET', k.body, unpack(bodies))
redis.call('HSET', k.meta, unpack(metas))
if #later > 0 then
  redis.call('ZADD', k.delayed, unpack(later))
end

if scored then
  redis.call('ZADD', k.ready, unpack(scored))
end

redis.call('HINCRBY', k.stats, 'enqueued', n)
bump(k.stats, 'e', n, now)
-- Delayed jobs wake consumers too: a sleeping consumer re-reads the earliest run-at.
notify(k.notify, n, cap)
return {0}
