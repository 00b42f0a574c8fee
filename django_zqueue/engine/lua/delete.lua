-- delete.lua: remove a waiting (ready, delayed or for its parents), dead or expired job
-- together with its record.
-- A job in flight is left alone: its consumer holds a lease on it.
--
-- KEYS by role (_keys.lua, engine/keys.py SCRIPT_ROLES; ZQ_BAD_ARGUMENT, nothing
--   written, when a key is not its role's), in this order:
-- ready ZSET  delayed ZSET  dead ZSET  leased ZSET
-- body  HASH  meta    HASH  errors HASH  progress HASH
-- stats HASH  wait ZSET  wf_out ZSET  wf_res HASH
--   (a waiting job is deleted too; a deleted workflow job leaves an outbox entry, its
--   end a failure for its dependents: _wf_mark.lua)
-- expired ZSET   expiry ZSET   logs HASH (the queue's job logs: this job's is dropped;
--   soft, a key of another type is left as it is)   KEYS[16] steps HASH (this job's
--   durable step records, deleted)
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
--@include keys

local k = key_roles(KEYS, {'ready', 'delayed', 'dead', 'leased', 'body', 'meta', 'errors',
  'progress', 'stats', 'wait', 'wf_out', 'wf_res', 'expired', 'expiry', 'logs'})

guard_keys(KEYS)

local id = ARGV[1]
-- the set of the state `only` names
local in_set = ({ready = k.ready, delayed = k.delayed, dead = k.dead, waiting = k.wait,
  expired = k.expired})[ARGV[3] or '']
if in_set and not redis.call('ZSCORE', in_set, id) then
  return -2
end
if redis.call('ZSCORE', k.leased, id) or (ARGV[2] == '1' and redis.call('ZSCORE', k.dead, id)) then
  return -1
end
-- an expired job's end was recorded when it expired: not a second time
local ended = redis.call('ZREM', k.expired, id) == 1
local removed = redis.call('ZREM', k.ready, id) + redis.call('ZREM', k.delayed, id)
  + redis.call('ZREM', k.dead, id) + redis.call('ZREM', k.wait, id) + (ended and 1 or 0)
local raw = redis.call('HGET', k.meta, id)
if removed == 0 and not raw then
  return 0
end
redis.call('ZREM', k.expiry, id) -- its expiry, if it had one
local meta = parse_record(raw, true)
if meta and not ended then
  wf_mark(k.wf_out, k.wf_res, id, meta, false, 'deleted', now_ms())
end
if KEYS[16] then
  redis.call('DEL', KEYS[16]) -- its durable step records
end
redis.pcall('HDEL', k.logs, id) -- its log (soft)
drop_record(k.body, k.meta, k.errors, k.progress, id)
count_stat(k.stats, 'deleted', 1)
return 1
