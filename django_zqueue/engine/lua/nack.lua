-- nack.lua: a delivery failed: retry it (now, or after retry_ms) or, when its attempts
-- are spent or `bury` is set, move it to dead letters with the error.
--
-- KEYS by role (_keys.lua, engine/keys.py SCRIPT_ROLES; ZQ_BAD_ARGUMENT, nothing
--   written, when a key is not its role's), in this order:
-- ready  ZSET  delayed ZSET  leased ZSET  dead ZSET
-- body   HASH  meta    HASH  errors HASH  progress HASH
-- ctr    HASH  stats  HASH  notify LIST
-- wait  ZSET  wf_out ZSET  wf_res HASH (a dead workflow job
--   leaves an outbox entry, see _wf_mark.lua)
-- ARGV[1] id   ARGV[2] token   ARGV[3] error text, added to its attempts (_attempts.lua;
--   '' adds none)
-- ARGV[4] retry_ms (0 = ready now)   ARGV[5] bury (1 = dead now, whatever the attempts)
-- ARGV[6] the queue's policy, read by name (_policy.lua): mode, aging_us, dead_max,
--   dead_ttl_ms, trim_limit (dead letters removed at most per call), notify_cap
-- Raises ZQ_BAD_ARGUMENT (nothing written) for a retry_ms beyond the delay horizon, or a
--   policy that is not one (_policy.lua).
-- Returns: 1 retried; 2 dead; 3 dead, and its end is in the workflow outbox to
--   dispatch; 0 stale token, or a record that cannot be used (nothing
--   changed: the scanner moves it to dead letters when its lease runs out).
-- Work: O((1 + trim_limit) log N).

--@include bounds
--@include decode_meta
--@include now_ms
--@include ready_scores
--@include tick_us
--@include fmt
--@include series
--@include trim_dead
--@include notify
--@include wf_mark
--@include count
--@include guard
--@include record
--@include attempts
--@include policy
--@include keys

local k = key_roles(KEYS, {'ready', 'delayed', 'leased', 'dead', 'body', 'meta', 'errors',
  'progress', 'ctr', 'stats', 'notify', 'wait', 'wf_out', 'wf_res'})

guard_keys(KEYS)

local id, token = ARGV[1], tonumber(ARGV[2])
local p = read_policy(ARGV[6])
local retry_ms, bury, mode, aging_us = tonumber(ARGV[4]), ARGV[5] == '1', p.mode, p.aging_us
local dead_max, dead_ttl, limit, cap = p.dead_max, p.dead_ttl_ms, p.trim_limit, p.notify_cap
if not is_int(retry_ms, 0, MAX_DELAY_MS) then
  error('ZQ_BAD_ARGUMENT: retry_ms must be an integer in [0, ' .. MAX_DELAY_MS .. ']')
end
local meta = decode_meta(redis.call('HGET', k.meta, id))
if not meta or meta.t ~= token or not redis.call('ZSCORE', k.leased, id) then
  return 0
end
local failed_by = meta.c -- the consumer of this attempt, for its error (_attempts.lua)
local now = now_ms()
meta.t = nil
meta.c = nil
meta.q = nil
local dead = bury or (meta.a or 0) > (meta.m or 0)
local score = nil
if not dead and retry_ms <= 0 then
  score = fmt(ready_score(k.ctr, meta, mode, aging_us)) -- may raise: before any write
end
redis.call('ZREM', k.leased, id)
if ARGV[3] ~= '' then
  add_attempts(k.errors, now, {{id, ARGV[3], meta.a, failed_by}})
end
count_stat(k.stats, 'failed', 1)
bump(k.stats, 'f', 1, now)
redis.call('HSET', k.meta, id, (encode_record(meta)))
soft('HDEL', k.progress, id)
if dead then
  -- time of death in ms with a µs fraction from the monotonic clock: exact order
  redis.call('ZADD', k.dead, fmt(tick_us(k.ctr, 'dclock') / 1000), id)
  count_stat(k.stats, 'dead', 1)
  bump(k.stats, 'd', 1, now)
  if limit > 0 then
    trim_dead(k.dead, k.body, k.meta, k.errors, k.progress, now, dead_max, dead_ttl, limit)
  end
  local recorded = wf_mark(k.wf_out, k.wf_res, id, meta, false, nil, now)
  -- a slot is free: wake a consumer waiting under a concurrency limit
  notify(k.notify, 1, cap)
  if recorded then
    return 3
  end
  return 2
end
count_stat(k.stats, 'retried', 1)
if score then
  redis.call('ZADD', k.ready, score, id)
else
  redis.call('ZADD', k.delayed, now + retry_ms, id)
end
notify(k.notify, 1, cap)
return 1
