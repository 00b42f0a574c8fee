-- _series.lua: per-minute counters for the last hour, kept in the stats HASH as a ring
-- of 64 slots: field 'm<slot>' holds the minute a slot counts for; 'e' enqueued, 'a'
-- acked, 'f' failed, 'd' dead, 'r' ready depth (last sample), 't' run ms. A slot is
-- reset when reused, so the ring never grows: its counters to 0, and its depth the ready
-- depth then when the caller passes its ready set (a publish: the depth of a minute no
-- scan samples, read once per minute, not at every call), else removed (a minute with no
-- sample has no depth, never 0). bump adds to a counter, sample_depth records the ready
-- depth (ZCARD, O(1): the scan's, at every step); neither raises (a stats key of the
-- wrong type or a field that is not a number loses the sample: see _count.lua).
--@include count

local SERIES = {'e', 'a', 'f', 'd', 't'} -- the counters; 'r' is sampled, not counted
local function series_slot(stats, now, ready)
  local minute = math.floor(now / 60000)
  local slot = minute % 64
  local owner = redis.call('HGET', stats, 'm' .. slot)
  if owner ~= string.format('%d', minute) then
    local fields = {'m' .. slot, string.format('%d', minute)}
    for _, name in ipairs(SERIES) do
      fields[#fields + 1] = name .. slot
      fields[#fields + 1] = 0
    end
    if ready then -- the minute begins: its depth now
      fields[#fields + 1] = 'r' .. slot
      fields[#fields + 1] = redis.call('ZCARD', ready)
    end
    redis.call('HSET', stats, unpack(fields))
    if not ready then
      redis.call('HDEL', stats, 'r' .. slot)
    end
  end
  return slot
end

-- bump(stats, name, n, now[, ready]): add n to counter `name` of the minute `now`;
-- `ready`: the queue's ready set, whose depth a minute begun here is given
local function bump(stats, name, n, now, ready)
  local ok, slot = pcall(series_slot, stats, now, ready)
  if raise_oom(ok, slot) then
    raise_oom(pcall(redis.call, 'HINCRBY', stats, name .. slot, n))
  end
end

local function sample_depth(stats, ready, now)
  local ok, slot = pcall(series_slot, stats, now)
  if raise_oom(ok, slot) then
    raise_oom(pcall(redis.call, 'HSET', stats, 'r' .. slot, redis.call('ZCARD', ready)))
  end
end

-- take_pending(stats, now): move the count of 'en' (jobs published by publish_lean.lua
-- since the last call) into 'enqueued' and the 'e' of the minute `now`; never raises
local function take_pending(stats, now)
  local ok, n = pcall(redis.call, 'HGET', stats, 'en')
  n = raise_oom(ok, n) and tonumber(n)
  if not n or n == 0 or n % 1 ~= 0 then
    return
  end
  raise_oom(pcall(redis.call, 'HINCRBY', stats, 'en', -n))
  count_stat(stats, 'enqueued', n)
  bump(stats, 'e', n, now)
end
