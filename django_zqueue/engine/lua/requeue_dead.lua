-- requeue_dead.lua: move one dead job back to ready with a fresh attempt count.
-- Its last error stays on the record until the job next fails or finishes.
--
-- KEYS by role (_keys.lua, engine/keys.py SCRIPT_ROLES; ZQ_BAD_ARGUMENT, nothing
--   written, when a key is not its role's), in this order:
-- dead ZSET   ready ZSET   meta HASH   ctr HASH
-- stats HASH  notify LIST  errors HASH
-- wf_out ZSET  wf_res HASH (a workflow job records that it is revived:
--   its dependents buried on its account wait again, _wf_mark.lua)
-- KEYS[10] wf HASH (this job's workflow links: kept again without expiry)
-- ARGV[1] id   ARGV[2] the queue's policy, read by name (_policy.lua): mode, aging_us,
--   notify_cap
-- ARGV[3] front ('1' = to the front of the line, claimed next: its score is one less
--   than the lowest of the ready set and of `below`, _front.lua; else '' or '0': scored as
--   a new job of its priority, at the back of its line)
-- ARGV[4] below ('' = none: the lowest ready score of the queue's other partitions, read
--   by the caller, so that with `front` it also goes ahead of theirs)
-- Raises ZQ_BAD_ARGUMENT (nothing written) for a policy that is not a map, a `below`
--   that is not a score, or, with
--   `front`, when the front of the line is already at the lowest exact score (-2^53).
-- Returns: 1 requeued; 2 requeued, and recorded as revived in the workflow outbox (to
--   dispatch); 0 not a dead job (nothing changed); -2 its record cannot be used:
--   it stays dead, its error becomes 'corrupt record: ...' with the raw meta, and its
--   meta a minimal valid record, as bury_corrupt() leaves it (a second requeue runs it
--   once).
-- Work: O(log N).

--@include bounds
--@include decode_meta
--@include bury_corrupt
--@include now_ms
--@include ready_scores
--@include fmt
--@include notify
--@include wf_mark
--@include count
--@include guard
--@include record
--@include attempts
--@include front
--@include policy
--@include keys

local k = key_roles(KEYS, {'dead', 'ready', 'meta', 'ctr', 'stats', 'notify', 'errors',
  'wf_out', 'wf_res'})

guard_keys(KEYS)

local id, p, front, below = ARGV[1], read_policy(ARGV[2]), ARGV[3] == '1', nil
if ARGV[4] and ARGV[4] ~= '' then
  below = tonumber(ARGV[4])
  if not below or below ~= below or math.abs(below) > MAX_EXACT then
    error('ZQ_BAD_ARGUMENT: below must be a score within 2^53')
  end
end
if not redis.call('ZSCORE', k.dead, id) then
  return 0
end
local raw = redis.call('HGET', k.meta, id)
local meta, why = decode_meta(raw)
if not meta then -- as bury_corrupt() does, but it is dead already: no counter moves
  add_attempts(k.errors, now_ms(), {{id, 'corrupt record: ' .. why .. '\nraw meta: ' .. printable(raw)}})
  redis.call('HSET', k.meta, id, fresh_record({a = 0, m = 0, e = now_ms()}, raw))
  return -2
end
meta.a = 0
meta.t = nil
local score -- may raise: no write yet
if front then
  score = fmt(front_score(k.ready, below))
else
  score = fmt(ready_score(k.ctr, meta, p.mode, p.aging_us))
end
redis.call('ZREM', k.dead, id)
redis.call('HSET', k.meta, id, (encode_record(meta)))
redis.call('ZADD', k.ready, score, id)
count_stat(k.stats, 'requeued', 1)
redis.call('PERSIST', KEYS[10])
if wf_mark(k.wf_out, k.wf_res, id, meta, 'r', nil, now_ms()) then
  notify(k.notify, 1, p.notify_cap)
  return 2
end
notify(k.notify, 1, p.notify_cap)
return 1
