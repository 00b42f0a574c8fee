-- requeue_dead.lua: move one dead job back to ready with a fresh attempt count.
-- Its last error stays on the record until the job next fails or finishes.
--
-- KEYS[1] dead ZSET   KEYS[2] ready ZSET   KEYS[3] meta HASH   KEYS[4] ctr HASH
-- KEYS[5] stats HASH  KEYS[6] notify LIST  KEYS[7] errors HASH
-- KEYS[8] wf HASH (this job's workflow links: kept again without expiry)
-- KEYS[9] wf_out ZSET  KEYS[10] wf_res HASH (a workflow job records that it is revived:
--   its dependents buried on its account wait again, _wf_mark.lua)
-- ARGV[1] id   ARGV[2] mode   ARGV[3] aging_us   ARGV[4] notify_cap
-- Returns: 1 requeued; 2 requeued, and recorded as revived in the workflow outbox (to
--   dispatch); 0 not a dead job (nothing changed); -2 its record cannot be used:
--   it stays dead, its error becomes 'corrupt record: ...' with the raw meta, and its
--   meta a minimal valid record, as bury_corrupt() leaves it (a second requeue runs it
--   once).
-- Work: O(log N).

--@include decode_meta
--@include bury_corrupt
--@include now_ms
--@include ready_scores
--@include fmt
--@include notify
--@include wf_mark
--@include count
--@include guard
--@include attempts

guard_keys(KEYS)

local id = ARGV[1]
if not redis.call('ZSCORE', KEYS[1], id) then
  return 0
end
local raw = redis.call('HGET', KEYS[3], id)
local meta, why = decode_meta(raw)
if not meta then -- as bury_corrupt() does, but it is dead already: no counter moves
  add_attempts(KEYS[7], now_ms(), {{id, 'corrupt record: ' .. why .. '\nraw meta: ' .. printable(raw)}})
  redis.call('HSET', KEYS[3], id, cjson.encode({a = 0, m = 0, e = now_ms()}))
  return -2
end
meta.a = 0
meta.t = nil
local score = fmt(ready_score(KEYS[4], meta, ARGV[2], tonumber(ARGV[3]))) -- may raise: no write yet
redis.call('ZREM', KEYS[1], id)
redis.call('HSET', KEYS[3], id, cjson.encode(meta))
redis.call('ZADD', KEYS[2], score, id)
count_stat(KEYS[5], 'requeued', 1)
redis.call('PERSIST', KEYS[8])
if wf_mark(KEYS[9], KEYS[10], id, meta, 'r', nil, now_ms()) then
  notify(KEYS[6], 1, tonumber(ARGV[4]))
  return 2
end
notify(KEYS[6], 1, tonumber(ARGV[4]))
return 1
