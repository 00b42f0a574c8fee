-- touch.lua: heartbeat of a running job: extend its lease and optionally record progress.
--
-- KEYS[1] leased ZSET   KEYS[2] meta HASH   KEYS[3] progress HASH
-- ARGV[1] id   ARGV[2] token   ARGV[3] extend_ms (new deadline = now + extend_ms; 0 = keep;
--   -1 = the job's own visibility timeout, else ARGV[5])
-- ARGV[4] progress JSON ('' = unchanged)   ARGV[5] the queue's visibility timeout in ms
-- Returns: the lease deadline in ms (Redis TIME); 0 if the token is stale (nothing changed).
-- Work: O(log N).

local id, token = ARGV[1], tonumber(ARGV[2])
local raw = redis.call('HGET', KEYS[2], id)
local meta = raw and cjson.decode(raw)
if not meta or meta.t ~= token then
  return 0
end
local deadline = redis.call('ZSCORE', KEYS[1], id)
if not deadline then
  return 0
end
deadline = tonumber(deadline)
local extend = tonumber(ARGV[3])
if extend < 0 then
  extend = meta.v or tonumber(ARGV[5])
end
if extend > 0 then
  deadline = now_ms() + extend
  redis.call('ZADD', KEYS[1], 'XX', deadline, id)
end
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[3], id, ARGV[4])
end
return deadline
