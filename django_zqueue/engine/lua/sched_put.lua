-- sched_put.lua: change one stored periodic schedule atomically, as a compare-and-set on
-- its definition's digest: add, update, pause, resume or remove it. Nothing is written
-- when the stored definition is not the expected one.
--
-- KEYS[1] sched ZSET (schedule name -> next tick, ms)  KEYS[2] sched_defs HASH
-- KEYS[3] sched_last HASH
-- ARGV[1] name
-- ARGV[2] expected digest: '' = the schedule must be absent; '*' = any (or none)
-- ARGV[3] the new definition (JSON); '' = remove the schedule (definition, tick, last)
-- ARGV[4] next tick (ms); '' = out of the due set (paused)
-- ARGV[5] tick mode: 'set' = ARGV[4]; 'keep' = the stored tick if there is one;
--         'keep_due' = the stored tick if it is due now (it fires once, with the new
--         definition), else ARGV[4]
-- Returns: 1 done; 0 the stored definition is not the expected one (nothing changed).
-- Work: O(log N).

--@include now_ms
--@include guard

guard_keys(KEYS)

local name, expect = ARGV[1], ARGV[2]
local raw = redis.call('HGET', KEYS[2], name)
if expect == '' then
  if raw then
    return 0
  end
elseif expect ~= '*' then
  if not raw then
    return 0
  end
  local ok, old = pcall(cjson.decode, raw)
  if not ok or type(old) ~= 'table' or old['digest'] ~= expect then
    return 0
  end
end
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[2], name)
  redis.call('ZREM', KEYS[1], name)
  redis.call('HDEL', KEYS[3], name)
  return 1
end
redis.call('HSET', KEYS[2], name, ARGV[3])
if ARGV[4] == '' then
  redis.call('ZREM', KEYS[1], name)
  return 1
end
local current = redis.call('ZSCORE', KEYS[1], name)
local mode = ARGV[5]
if current and (mode == 'keep' or (mode == 'keep_due' and tonumber(current) <= now_ms())) then
  return 1
end
redis.call('ZADD', KEYS[1], ARGV[4], name)
return 1
