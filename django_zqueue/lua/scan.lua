-- scan.lua: one bounded step of housekeeping: promote due delayed jobs, recover expired
-- leases (retry, or dead letters when attempts are spent), trim dead letters by age and
-- count. Safe to run from any number of processes at once.
--
-- KEYS[1] ready  ZSET  KEYS[2] delayed ZSET  KEYS[3] leased ZSET  KEYS[4] dead ZSET
-- KEYS[5] body   HASH  KEYS[6] meta    HASH  KEYS[7] errors HASH  KEYS[8] progress HASH
-- KEYS[9] ctr    HASH  KEYS[10] stats  HASH  KEYS[11] notify LIST
-- ARGV[1] limit (jobs per step and kind, 1..5000)   ARGV[2] mode   ARGV[3] aging_us
-- ARGV[4] dead_max   ARGV[5] dead_ttl_ms   ARGV[6] notify_cap
-- Returns: {promoted, recovered, buried, trimmed, more}; more = 1 when a step hit `limit`
--   (call again), else 0.
-- Work: O(limit log N) per kind.

local k = {ready = KEYS[1], delayed = KEYS[2], leased = KEYS[3], dead = KEYS[4], body = KEYS[5],
  meta = KEYS[6], errors = KEYS[7], progress = KEYS[8], ctr = KEYS[9], stats = KEYS[10],
  notify = KEYS[11]}
local limit, mode, aging_us = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local dead_max, dead_ttl, cap = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local now = now_ms()

local promoted = promote(k.delayed, k.ready, k.meta, k.ctr, now, limit, mode, aging_us)
notify(k.notify, promoted, cap)

local expired = redis.call('ZRANGEBYSCORE', k.leased, '-inf', '(' .. fmt(now), 'LIMIT', 0, limit)
local recovered, buried = 0, 0
for _, id in ipairs(expired) do
  redis.call('ZREM', k.leased, id)
  redis.call('HINCRBY', k.stats, 'expired', 1)
  local raw = redis.call('HGET', k.meta, id)
  local meta = raw and cjson.decode(raw) or {p = 0, a = 1, m = 0, e = now}
  local total = (meta.m or 0) + 1
  redis.call('HSET', k.errors, id, 'lease expired (consumer ' .. tostring(meta.c or '?') ..
    ', attempt ' .. tostring(meta.a or 0) .. ' of ' .. tostring(total) .. ')')
  if retry_or_bury(k, id, meta, now, 0, false, mode, aging_us, dead_max, dead_ttl, 0, cap) == 2 then
    buried = buried + 1
  else
    recovered = recovered + 1
  end
end

sample_depth(k.stats, k.ready, now)

local trimmed, more_dead = trim_dead(k.dead, k.body, k.meta, k.errors, k.progress, now,
  dead_max, dead_ttl, limit)
local more = 0
if promoted == limit or #expired == limit or more_dead then
  more = 1
end
return {promoted, recovered, buried, trimmed, more}
