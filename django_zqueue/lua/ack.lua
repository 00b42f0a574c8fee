-- ack.lua: finish a delivery: the job and its record are removed.
--
-- KEYS[1] leased ZSET   KEYS[2] body HASH   KEYS[3] meta HASH   KEYS[4] errors HASH
-- KEYS[5] progress HASH KEYS[6] stats HASH  KEYS[7] notify LIST
-- ARGV[1] id   ARGV[2] token (from the claim)   ARGV[3] notify_cap (0 = don't notify;
--   set when the queue has a concurrency limit, so a consumer waiting for room wakes)
-- Returns: 1 acked; 0 stale (the job is not leased under this token: its lease was
--   recovered or it was handed to another consumer) and nothing changed.
-- Work: O(log N).

local id, token, cap = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local raw = redis.call('HGET', KEYS[3], id)
if not raw or cjson.decode(raw).t ~= token or not redis.call('ZSCORE', KEYS[1], id) then
  return 0
end
redis.call('ZREM', KEYS[1], id)
drop_record(KEYS[2], KEYS[3], KEYS[4], KEYS[5], id)
redis.call('HINCRBY', KEYS[6], 'acked', 1)
if cap > 0 then
  notify(KEYS[7], 1, cap)
end
return 1
