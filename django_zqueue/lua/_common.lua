-- _common.lua: helpers prepended to every operation script by scripts.py.
-- Touches no key by itself: every helper takes the key names it uses as arguments,
-- and those names always come from the calling script's KEYS.

local PRIORITY_BAND = 4398046511104 -- 2^42: strict mode score = seq - priority * 2^42

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- A score as a string Redis parses back exactly (Lua's own tostring keeps 14 digits).
local function fmt(x)
  return string.format('%.17g', x)
end

-- A strictly increasing server clock in microseconds, kept in HASH ctr under `field`:
-- Redis TIME, or one more than the last value when TIME has not moved on.
local function tick_us(ctr, field)
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local last = tonumber(redis.call('HGET', ctr, field) or '0')
  if us <= last then
    us = last + 1
  end
  redis.call('HSET', ctr, field, fmt(us))
  return us
end

-- The sequence of a partitioned queue in strict mode ('tstrict'): milliseconds of Redis
-- TIME since 2025-01-01T00:00:00Z, or one more than the last value when TIME has not
-- moved on, kept in HASH ctr field 'tseq'. Comparable across the queue's partitions (one
-- clock), strictly increasing within one (FIFO). Reserves `n` numbers and returns the
-- first; raises ZQ_SEQUENCE_EXHAUSTED, writing nothing, past 2^42 - 1.
local TSEQ_EPOCH_MS = 1735689600000
local function tick_seq(ctr, n)
  local seq = now_ms() - TSEQ_EPOCH_MS
  local last = tonumber(redis.call('HGET', ctr, 'tseq') or '0')
  if seq <= last then
    seq = last + 1
  end
  if seq + n - 1 >= PRIORITY_BAND then
    error('ZQ_SEQUENCE_EXHAUSTED: the partition has used 2^42 sequence numbers')
  end
  redis.call('HSET', ctr, 'tseq', fmt(seq + n - 1))
  return seq
end

-- Ready scores for jobs in this order, with one counter update: `entries` is a list of
-- {id, meta}; returns the flat {score1, id1, score2, id2, ...} that ZADD takes. A score
-- is the record's raw score override (`s`), else priority + FIFO order:
-- strict : a server-side sequence inside the priority's band;
-- tstrict: the same bands, the sequence from tick_seq (partitioned queues);
-- aging  : the monotonic server clock in microseconds minus priority * aging_us.
-- A spent strict sequence raises before anything is written.
local function ready_scores(ctr, entries, mode, aging_us)
  local need = 0
  for _, e in ipairs(entries) do
    if not e[2].s then
      need = need + 1
    end
  end
  local value = 0 -- the first sequence number (strict) or clock value (aging)
  if need > 0 then
    if mode == 'aging' then
      value = tick_us(ctr, 'clock')
      if need > 1 then
        redis.call('HSET', ctr, 'clock', fmt(value + need - 1))
      end
    elseif mode == 'tstrict' then
      value = tick_seq(ctr, need)
    else
      value = redis.call('HINCRBY', ctr, 'seq', need) - need + 1
      if value + need - 1 >= PRIORITY_BAND then
        redis.call('HINCRBY', ctr, 'seq', -need) -- give the numbers back: nothing changed
        error('ZQ_SEQUENCE_EXHAUSTED: the queue has used 2^42 sequence numbers')
      end
    end
  end
  local out = {}
  for _, e in ipairs(entries) do
    local meta, score = e[2], nil
    if meta.s then
      score = tonumber(meta.s)
    else
      local step = PRIORITY_BAND
      if mode == 'aging' then
        step = aging_us
      end
      score = value - (meta.p or 0) * step
      value = value + 1
    end
    out[#out + 1] = fmt(score)
    out[#out + 1] = e[1]
  end
  return out
end

-- The ready score of one job record (see ready_scores).
local function ready_score(ctr, meta, mode, aging_us)
  return tonumber(ready_scores(ctr, {{'', meta}}, mode, aging_us)[1])
end

-- Per-minute counters for the last hour, kept in the stats HASH as a ring of 64 slots:
-- field 'm<slot>' holds the minute a slot counts for; 'e' enqueued, 'a' acked, 'f' failed,
-- 'd' dead, 'r' ready depth (last sample), 't' run ms. A slot is reset when reused, so
-- the ring never grows.
local SERIES = {'e', 'a', 'f', 'd', 'r', 't'}
local function series_slot(stats, now)
  local minute = math.floor(now / 60000)
  local slot = minute % 64
  local owner = redis.call('HGET', stats, 'm' .. slot)
  if owner ~= string.format('%d', minute) then
    local fields = {'m' .. slot, string.format('%d', minute)}
    for _, name in ipairs(SERIES) do
      fields[#fields + 1] = name .. slot
      fields[#fields + 1] = 0
    end
    redis.call('HSET', stats, unpack(fields))
  end
  return slot
end

local function bump(stats, name, n, now)
  redis.call('HINCRBY', stats, name .. series_slot(stats, now), n)
end

local function sample_depth(stats, ready, now)
  redis.call('HSET', stats, 'r' .. series_slot(stats, now), redis.call('ZCARD', ready))
end

-- Wake up to `n` blocked consumers; the list never holds more than `cap` tokens.
local function notify(key, n, cap)
  if n <= 0 then
    return
  end
  if n > cap then
    n = cap
  end
  local tokens = {}
  for i = 1, n do
    tokens[i] = '1'
  end
  if redis.call('LPUSH', key, unpack(tokens)) > cap then
    redis.call('LTRIM', key, 0, cap - 1)
  end
end

local function drop_record(body, meta, errors, progress, id)
  redis.call('HDEL', body, id)
  redis.call('HDEL', meta, id)
  redis.call('HDEL', errors, id)
  redis.call('HDEL', progress, id)
end

-- Remove dead letters older than ttl_ms and beyond max_count, at most `limit` in all.
-- Returns how many were removed and whether more remain to trim.
local function trim_dead(dead, body, meta, errors, progress, now, max_count, ttl_ms, limit)
  local removed = 0
  local old = redis.call('ZRANGEBYSCORE', dead, '-inf', '(' .. fmt(now - ttl_ms), 'LIMIT', 0, limit)
  for _, id in ipairs(old) do
    redis.call('ZREM', dead, id)
    drop_record(body, meta, errors, progress, id)
    removed = removed + 1
  end
  local more = (#old == limit)
  local excess = redis.call('ZCARD', dead) - max_count
  if excess > 0 then
    local room = limit - removed
    if excess > room then
      more = true
      excess = room
    end
    if excess > 0 then
      local ids = redis.call('ZRANGE', dead, 0, excess - 1)
      for _, id in ipairs(ids) do
        redis.call('ZREM', dead, id)
        drop_record(body, meta, errors, progress, id)
        removed = removed + 1
      end
    end
  end
  return removed, more
end

-- Move a job that is no longer leased either back to ready (or delayed, after
-- `retry_ms`), or to dead letters when its attempts are spent or `bury` is set; a death
-- trims at most `limit` dead letters (0: leave trimming to the caller).
-- Returns 1 for a retry, 2 for dead.
-- The dead ZSET is scored by time of death in ms, with a microsecond fraction from the
-- monotonic clock so that deaths keep their exact order.
local function retry_or_bury(k, id, meta, now, retry_ms, bury, mode, aging_us, dead_max, dead_ttl, limit, cap)
  meta.t = nil
  meta.c = nil
  meta.q = nil
  if bury or (meta.a or 0) > (meta.m or 0) then
    redis.call('HSET', k.meta, id, cjson.encode(meta))
    redis.call('HDEL', k.progress, id)
    redis.call('ZADD', k.dead, fmt(tick_us(k.ctr, 'dclock') / 1000), id)
    redis.call('HINCRBY', k.stats, 'dead', 1)
    bump(k.stats, 'd', 1, now)
    if limit > 0 then
      trim_dead(k.dead, k.body, k.meta, k.errors, k.progress, now, dead_max, dead_ttl, limit)
    end
    -- a slot is free: wake a consumer waiting under a concurrency limit
    notify(k.notify, 1, cap)
    return 2
  end
  redis.call('HSET', k.meta, id, cjson.encode(meta))
  redis.call('HDEL', k.progress, id)
  redis.call('HINCRBY', k.stats, 'retried', 1)
  if retry_ms > 0 then
    redis.call('ZADD', k.delayed, now + retry_ms, id)
  else
    redis.call('ZADD', k.ready, fmt(ready_score(k.ctr, meta, mode, aging_us)), id)
  end
  notify(k.notify, 1, cap)
  return 1
end

-- Move up to `limit` due delayed jobs to ready, in a constant number of commands.
-- Returns how many moved.
local function promote(delayed, ready, meta, ctr, now, limit, mode, aging_us)
  local due = redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, limit)
  if #due == 0 then
    return 0
  end
  local raws = redis.call('HMGET', meta, unpack(due))
  local entries = {}
  for i, id in ipairs(due) do
    entries[i] = {id, raws[i] and cjson.decode(raws[i]) or {}}
  end
  local scored = ready_scores(ctr, entries, mode, aging_us) -- may raise: before any write
  redis.call('ZREM', delayed, unpack(due))
  redis.call('ZADD', ready, unpack(scored))
  return #due
end

-- The state of a tag already in use: ready | delayed | leased | dead | unknown (a record in
-- no set), or nil when the tag is free.
local function tag_state(k, id)
  if redis.call('HEXISTS', k.meta, id) == 0 then
    return nil
  end
  for _, name in ipairs({'ready', 'delayed', 'leased', 'dead'}) do
    if redis.call('ZSCORE', k[name], id) then
      return name
    end
  end
  return 'unknown'
end

-- A new job is given as 8 consecutive arguments starting at a[b]: id, body, priority,
-- score ('' = computed), delay_ms ('' = none), run_at_ms ('' = none; absolute),
-- max_retries, visibility_ms ('' = the queue's).
-- new_record: its record and its run-at (nil: ready now). Priority 0 and attempts 0 are
-- left out (absent = 0): 16 bytes less per waiting job.
local function new_record(a, b, now)
  local meta = {m = tonumber(a[b + 6]), e = now}
  if a[b + 2] ~= '0' then
    meta.p = tonumber(a[b + 2])
  end
  if a[b + 3] ~= '' then
    meta.s = a[b + 3]
  end
  if a[b + 7] ~= '' then
    meta.v = tonumber(a[b + 7])
  end
  local run_at = nil
  if a[b + 4] ~= '' then
    run_at = now + tonumber(a[b + 4])
  elseif a[b + 5] ~= '' then
    run_at = tonumber(a[b + 5])
  end
  return meta, run_at
end

-- add_job: write one new job; the caller has checked the tag is free.
local function add_job(k, a, b, now, mode, aging_us)
  local id, body = a[b], a[b + 1]
  local meta, run_at = new_record(a, b, now)
  redis.call('HSET', k.body, id, body)
  redis.call('HSET', k.meta, id, cjson.encode(meta))
  if run_at and run_at > now then
    redis.call('ZADD', k.delayed, run_at, id)
  else
    redis.call('ZADD', k.ready, fmt(ready_score(k.ctr, meta, mode, aging_us)), id)
  end
end

-- ===== operation script follows =====
