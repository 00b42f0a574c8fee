-- set_priority.lua: change the priority of a waiting job (ready or delayed).
-- A ready job moves to the band of its new priority at the same point of the queue's
-- order it entered at (strict: its sequence number; aging: its entry time), so among
-- jobs of its new priority it keeps its FIFO place; no sequence number is used. In a fair
-- queue (mode 'fair') a priority step is one of its group's turns (1 / weight), as
-- _fair.lua scores it, not a band. A job
-- with a raw score (`s`) keeps its place (the score is what orders it); a delayed job
-- takes the new priority when it is promoted. A job of a fair queue set aside by its
-- group's limit (in delayed, with its gpark entry and `ps` in its record: claim_fair.lua)
-- has the score it will come back at moved as a ready job's would be.
--
-- KEYS[1] ready ZSET   KEYS[2] delayed ZSET   KEYS[3] leased ZSET   KEYS[4] dead ZSET
-- KEYS[5] meta HASH    KEYS[6] gpark ZSET (jobs set aside by their group's limit)
-- ARGV[1] id   ARGV[2] priority (integer in [PRIORITY_MIN, PRIORITY_MAX], -1000..1000)
-- ARGV[3] the queue's policy, read by name (_policy.lua): mode ('strict' | 'tstrict' | 'aging' |
--   'fair'), aging_us
-- Raises ZQ_BAD_ARGUMENT (nothing written) for a priority out of bounds, or a policy that
--   is not one (_policy.lua).
-- Returns: 1 changed; 0 no such job; -1 in flight or dead, or its record cannot be used
--   (nothing changed).
-- Work: O(log N).

--@include bounds
--@include decode_meta
--@include priority_band
--@include fmt
--@include park_member
--@include guard
--@include record
--@include policy

guard_keys(KEYS)

local id, p = ARGV[1], tonumber(ARGV[2])
local policy = read_policy(ARGV[3])
local mode, aging_us = policy.mode, policy.aging_us
if not is_int(p, PRIORITY_MIN, PRIORITY_MAX) or not is_int(aging_us, 0, MAX_EXACT) then
  error('ZQ_BAD_ARGUMENT: priority must be an integer in [' .. PRIORITY_MIN .. ', '
    .. PRIORITY_MAX .. ']')
end
if redis.call('ZSCORE', KEYS[3], id) or redis.call('ZSCORE', KEYS[4], id) then
  return -1
end
local ready = redis.call('ZSCORE', KEYS[1], id)
local run_at = not ready and redis.call('ZSCORE', KEYS[2], id)
if not ready and not run_at then
  return 0
end
local meta = decode_meta(redis.call('HGET', KEYS[5], id))
if not meta then
  return -1
end
local old = meta.p or 0
if p == 0 then
  meta.p = nil
else
  meta.p = p
end
local step = PRIORITY_BAND
if mode == 'aging' then
  step = aging_us
elseif mode == 'fair' then -- a priority is a head start of that many of the group's turns
  step = 1 / (meta.w or 1)
end
if ready and not meta.s and old ~= p then
  redis.call('ZADD', KEYS[1], 'XX', fmt(tonumber(ready) + (old - p) * step), id)
elseif run_at and meta.ps and mode == 'fair' and not meta.s and old ~= p then
  local was = park_member(meta.g or '', meta.ps, run_at, id)
  if redis.call('ZSCORE', KEYS[6], was) then -- set aside (not a stale `ps`)
    meta.ps = fmt(tonumber(meta.ps) + (old - p) * step)
    redis.call('ZREM', KEYS[6], was)
    redis.call('ZADD', KEYS[6], 0, park_member(meta.g or '', meta.ps, run_at, id))
  end
end
redis.call('HSET', KEYS[5], id, (encode_record(meta)))
return 1
