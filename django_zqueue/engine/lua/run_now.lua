-- run_now.lua: move a waiting job (ready or delayed) to the front of its line: its ready
-- score becomes one less than the lowest of the shard's ready set and of `below`.
-- Its record is unchanged: a later retry, recovery or requeue scores it as usual.
--
-- KEYS[1] ready ZSET   KEYS[2] delayed ZSET   KEYS[3] leased ZSET   KEYS[4] dead ZSET
-- KEYS[5] meta HASH    KEYS[6] notify LIST
-- ARGV[1] id   ARGV[2] below ('' = none: the lowest ready score of the queue's other
--   partitions, read by the caller, so the job also goes ahead of theirs)
-- ARGV[3] the queue's policy, read by name (_policy.lua): notify_cap
-- Raises ZQ_BAD_ARGUMENT (nothing written) for a policy that is not one (_policy.lua), a
--   `below` that is not a score, or when the
--   front of the line is already at the lowest exact score (-2^53).
-- Returns: 1 moved (or already first); 0 no such job; -1 in flight or dead (nothing
--   changed).
-- Work: O(log N).

--@include bounds
--@include fmt
--@include notify
--@include guard
--@include policy

guard_keys(KEYS)

local id, cap = ARGV[1], read_policy(ARGV[3]).notify_cap
local below = nil
if ARGV[2] ~= '' then
  below = tonumber(ARGV[2])
  if not below or below ~= below or math.abs(below) > MAX_EXACT then
    error('ZQ_BAD_ARGUMENT: below must be a score within 2^53')
  end
end
if redis.call('ZSCORE', KEYS[3], id) or redis.call('ZSCORE', KEYS[4], id) then
  return -1
end
local ready = redis.call('ZSCORE', KEYS[1], id)
local delayed = ready == false and redis.call('ZSCORE', KEYS[2], id)
if not ready and not delayed then
  return 0
end
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local lowest = below
if head[2] and (lowest == nil or tonumber(head[2]) < lowest) then
  lowest = tonumber(head[2])
  if head[1] == id and (below == nil or lowest < below) then
    return 1 -- first already
  end
end
local score = 0
if lowest ~= nil then
  if lowest <= -MAX_EXACT then -- lowest - 1 would not be exact
    error('ZQ_BAD_ARGUMENT: the front of the line is at the lowest exact score')
  end
  score = lowest - 1
end
if delayed then
  redis.call('ZREM', KEYS[2], id)
  notify(KEYS[6], 1, cap)
end
redis.call('ZADD', KEYS[1], fmt(score), id)
return 1
