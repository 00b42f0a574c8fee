-- wf_clear.lua: an outbox entry was applied to every dependent: remove it, unless a
-- later end replaced it meanwhile; then the job's links: deleted when the job is gone,
-- kept with the life of a dead letter (dead_ttl) when it is dead (a requeue keeps them
-- again, requeue_dead.lua), left as they are while it is back in line.
--
-- KEYS by role (_keys.lua, engine/keys.py SCRIPT_ROLES; ZQ_BAD_ARGUMENT, nothing
--   written, when a key is not its role's), in this order:
-- wf_out ZSET  wf_res HASH  meta HASH  dead ZSET
-- KEYS[5] wf HASH (the job's links)
-- ARGV[1] id   ARGV[2] the entry's value as the dispatcher read it   ARGV[3] the queue's policy,
--   read by name (_policy.lua): dead_ttl_ms
-- Returns: 1 cleared; 0 the entry is gone or was replaced (nothing changed).
-- Work: O(1), plus the size of the links when they are deleted.

--@include bounds
--@include guard
--@include policy
--@include keys

local k = key_roles(KEYS, {'wf_out', 'wf_res', 'meta', 'dead'})

guard_keys(KEYS)

local id, seen, ttl = ARGV[1], ARGV[2], read_policy(ARGV[3]).dead_ttl_ms
if not is_int(ttl, 0, MAX_EXACT) then
  error('ZQ_BAD_ARGUMENT: dead_ttl_ms must be an integer >= 0')
end
if redis.call('HGET', k.wf_res, id) ~= seen then
  return 0
end
redis.call('ZREM', k.wf_out, id)
redis.call('HDEL', k.wf_res, id)
if redis.call('HEXISTS', k.meta, id) == 0 then
  redis.call('DEL', KEYS[5])
elseif redis.call('ZSCORE', k.dead, id) then
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[5], ttl)
  else
    redis.call('DEL', KEYS[5])
  end
end
return 1
