-- requeue_dead.lua: move one dead job back to ready with a fresh attempt count.
-- Its last error stays on the record until the job next fails or finishes.
--
-- KEYS[1] dead ZSET   KEYS[2] ready ZSET   KEYS[3] meta HASH   KEYS[4] ctr HASH
-- KEYS[5] stats HASH  KEYS[6] notify LIST
-- ARGV[1] id   ARGV[2] mode   ARGV[3] aging_us   ARGV[4] notify_cap
-- Returns: 1 requeued; 0 not a dead job (nothing changed).
-- Work: O(log N).

local id = ARGV[1]
if redis.call('ZREM', KEYS[1], id) == 0 then
  return 0
end
local raw = redis.call('HGET', KEYS[3], id)
local meta = raw and cjson.decode(raw) or {p = 0, m = 0}
meta.a = 0
meta.t = nil
redis.call('HSET', KEYS[3], id, cjson.encode(meta))
redis.call('ZADD', KEYS[2], fmt(ready_score(KEYS[4], meta, ARGV[2], tonumber(ARGV[3]))), id)
redis.call('HINCRBY', KEYS[5], 'requeued', 1)
notify(KEYS[6], 1, tonumber(ARGV[4]))
return 1
