-- release.lua: give a delivery back unrun (a worker shutting down, or handing back jobs
-- it prefetched): the job returns to ready at once, at the place in line it had when
-- claimed (its ready score then, kept in the record as `q`), and the attempt is not
-- counted.
--
-- KEYS[1] leased ZSET  KEYS[2] ready ZSET  KEYS[3] meta HASH  KEYS[4] ctr HASH
-- KEYS[5] progress HASH  KEYS[6] stats HASH  KEYS[7] notify LIST
-- ARGV[1] id   ARGV[2] token   ARGV[3] the queue's policy, read by name (_policy.lua): mode, aging_us,
--   notify_cap
-- Raises ZQ_BAD_ARGUMENT (nothing written) for a policy that is not a map.
-- Returns: 1 released; 0 stale token, or a record that cannot be used (nothing changed:
--   the scanner moves it to dead letters when its lease runs out).
-- Work: O(log N).

--@include decode_meta
--@include ready_scores
--@include fmt
--@include notify
--@include count
--@include guard
--@include record
--@include policy

guard_keys(KEYS)

local id, token, p = ARGV[1], tonumber(ARGV[2]), read_policy(ARGV[3])
local meta = decode_meta(redis.call('HGET', KEYS[3], id))
if not meta or meta.t ~= token or not redis.call('ZSCORE', KEYS[1], id) then
  return 0
end
meta.a = math.max(0, (meta.a or 1) - 1)
meta.t = nil
meta.c = nil
local score = meta.q
meta.q = nil
if not score then -- a record claimed before `q` was kept
  score = fmt(ready_score(KEYS[4], meta, p.mode, p.aging_us)) -- may raise: no write yet
end
redis.call('ZREM', KEYS[1], id)
redis.call('HSET', KEYS[3], id, (encode_record(meta)))
soft('HDEL', KEYS[5], id)
redis.call('ZADD', KEYS[2], score, id)
count_stat(KEYS[6], 'released', 1)
notify(KEYS[7], 1, p.notify_cap)
return 1
