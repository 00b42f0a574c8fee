-- _count.lua: count_stat: add `n` to a lifetime counter of the stats HASH. It never raises:
-- a field that is not an integer starts again from `n`, and a stats key of the wrong
-- type loses the count (zqueue_doctor reports both), so a counter can never stop a
-- script half-way.

local function count_stat(stats, field, n)
  if not pcall(redis.call, 'HINCRBY', stats, field, n) then
    pcall(redis.call, 'HSET', stats, field, n)
  end
end
