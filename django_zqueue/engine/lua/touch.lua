-- touch.lua: heartbeat of a running job: extend its lease and optionally record progress.
--
-- KEYS[1] leased ZSET   KEYS[2] meta HASH   KEYS[3] progress HASH
-- KEYS[4] cancelled STRING (this job's record of a cancel, written by cancel.lua)
-- ARGV[1] id   ARGV[2] token   ARGV[3] extend_ms (new deadline = now + extend_ms; 0 = keep;
--   -1 = the job's own visibility timeout, else the queue's)
-- ARGV[4] progress JSON ('' = unchanged)
-- ARGV[5] the queue's policy, read by name (_policy.lua): visibility_ms (its visibility timeout)
-- Raises ZQ_BAD_ARGUMENT (nothing written) for an extension beyond 7 days, or a policy
--   that is not one (_policy.lua).
-- Returns: the lease deadline in ms (Redis TIME); 0 if the token is stale or the record
--   cannot be used (nothing changed: the lease runs out, and the scanner moves the job
--   to dead letters); -1 if this delivery was cancelled (cancel.lua: its worker stops it).
-- Work: O(log N).

--@include bounds
--@include decode_meta
--@include now_ms
--@include guard
--@include count
--@include policy

guard_keys(KEYS)

local id, token = ARGV[1], tonumber(ARGV[2])
local extend, vt = tonumber(ARGV[3]), read_policy(ARGV[5]).visibility_ms
if not is_int(extend, -1, MAX_LEASE_MS) or not is_int(vt, 0, MAX_LEASE_MS) then
  error('ZQ_BAD_ARGUMENT: extend_ms must be -1, 0 or at most ' .. MAX_LEASE_MS)
end
local meta = decode_meta(redis.call('HGET', KEYS[2], id))
if not meta or meta.t ~= token then
  local ok, rec = pcall(cjson.decode, redis.call('GET', KEYS[4]) or '')
  if ok and type(rec) == 'table' and rec.t == token then
    return -1
  end
  return 0
end
local deadline = redis.call('ZSCORE', KEYS[1], id)
if not deadline then
  return 0
end
deadline = tonumber(deadline)
if extend < 0 then
  extend = meta.v or vt
end
if extend > 0 then
  deadline = now_ms() + extend
  redis.call('ZADD', KEYS[1], 'XX', deadline, id)
end
if ARGV[4] ~= '' then
  soft('HSET', KEYS[3], id, ARGV[4])
end
return deadline
