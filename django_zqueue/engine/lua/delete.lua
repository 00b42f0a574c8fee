-- delete.lua: remove a waiting (ready, delayed or for its parents), dead or expired job
-- together with its record.
-- A job in flight is left alone: its consumer holds a lease on it.
--
-- KEYS[1] ready ZSET  KEYS[2] delayed ZSET  KEYS[3] dead ZSET  KEYS[4] leased ZSET
-- KEYS[5] body  HASH  KEYS[6] meta    HASH  KEYS[7] errors HASH  KEYS[8] progress HASH
-- KEYS[9] stats HASH  KEYS[10] wait ZSET  KEYS[11] wf_out ZSET  KEYS[12] wf_res HASH
--   (a waiting job is deleted too; a deleted workflow job leaves an outbox entry, its
--   end a failure for its dependents: _wf_mark.lua)
-- KEYS[13] expired ZSET   KEYS[14] expiry ZSET   KEYS[15] steps HASH (this job's durable
--   step records, deleted)
-- ARGV[1] id   ARGV[2] waiting_only (1 = refuse dead jobs too: cancel)
-- ARGV[3] only (optional: '' any; ready | delayed | dead | waiting | expired: only a job
--   in that state, as a bulk action on one state needs)
-- Returns: 1 deleted; 0 no such job; -1 in flight, or dead with waiting_only (nothing
--   changed); -2 not in the state `only` names (nothing changed).
-- Work: O(log N).

--@include record
--@include drop_record
--@include now_ms
--@include wf_mark
--@include count
--@include guard

guard_keys(KEYS)

local id = ARGV[1]
local only = ({ready = 1, delayed = 2, dead = 3, waiting = 10, expired = 13})[ARGV[3] or '']
local in_set = only and KEYS[only] -- the set of the state `only` names
if in_set and not redis.call('ZSCORE', in_set, id) then
  return -2
end
if redis.call('ZSCORE', KEYS[4], id) or (ARGV[2] == '1' and redis.call('ZSCORE', KEYS[3], id)) then
  return -1
end
-- an expired job's end was recorded when it expired: not a second time
local ended = redis.call('ZREM', KEYS[13], id) == 1
local removed = redis.call('ZREM', KEYS[1], id) + redis.call('ZREM', KEYS[2], id)
  + redis.call('ZREM', KEYS[3], id) + redis.call('ZREM', KEYS[10], id) + (ended and 1 or 0)
local raw = redis.call('HGET', KEYS[6], id)
if removed == 0 and not raw then
  return 0
end
redis.call('ZREM', KEYS[14], id) -- its expiry, if it had one
local meta = parse_record(raw, true)
if meta and not ended then
  wf_mark(KEYS[11], KEYS[12], id, meta, false, 'deleted', now_ms())
end
if KEYS[15] then
  redis.call('DEL', KEYS[15]) -- its durable step records
end
drop_record(KEYS[5], KEYS[6], KEYS[7], KEYS[8], id)
count_stat(KEYS[9], 'deleted', 1)
return 1
