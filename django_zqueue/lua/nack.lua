-- nack.lua: a delivery failed: retry it (now, or after retry_ms) or, when its attempts
-- are spent or `bury` is set, move it to dead letters with the error.
--
-- KEYS[1] ready  ZSET  KEYS[2] delayed ZSET  KEYS[3] leased ZSET  KEYS[4] dead ZSET
-- KEYS[5] body   HASH  KEYS[6] meta    HASH  KEYS[7] errors HASH  KEYS[8] progress HASH
-- KEYS[9] ctr    HASH  KEYS[10] stats  HASH  KEYS[11] notify LIST
-- ARGV[1] id   ARGV[2] token   ARGV[3] error text ('' keeps the previous one)
-- ARGV[4] retry_ms (0 = ready now)   ARGV[5] bury (1 = dead now, whatever the attempts)
-- ARGV[6] mode   ARGV[7] aging_us   ARGV[8] dead_max   ARGV[9] dead_ttl_ms
-- ARGV[10] trim_limit (dead letters removed at most per call)   ARGV[11] notify_cap
-- Returns: 1 retried; 2 dead; 0 stale token (nothing changed).
-- Work: O((1 + trim_limit) log N).

local k = {ready = KEYS[1], delayed = KEYS[2], leased = KEYS[3], dead = KEYS[4], body = KEYS[5],
  meta = KEYS[6], errors = KEYS[7], progress = KEYS[8], ctr = KEYS[9], stats = KEYS[10],
  notify = KEYS[11]}
local id, token = ARGV[1], tonumber(ARGV[2])
local raw = redis.call('HGET', k.meta, id)
if not raw then
  return 0
end
local meta = cjson.decode(raw)
if meta.t ~= token or not redis.call('ZSCORE', k.leased, id) then
  return 0
end
redis.call('ZREM', k.leased, id)
if ARGV[3] ~= '' then
  redis.call('HSET', k.errors, id, ARGV[3])
end
redis.call('HINCRBY', k.stats, 'failed', 1)
local now = now_ms()
bump(k.stats, 'f', 1, now)
return retry_or_bury(k, id, meta, now, tonumber(ARGV[4]), ARGV[5] == '1', ARGV[6],
  tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11]))
