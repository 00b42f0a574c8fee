-- _front.lua: front_score(ready, below): a ready score ahead of every job of the `ready`
-- ZSET and of `below` (a score, or nil): one less than the lowest of them, 0 when there
-- is none. Raises ZQ_BAD_ARGUMENT (call it before the first write) when that would pass
-- the lowest exact score (-2^53). Work: O(log N).
--@include bounds

local function front_score(ready, below)
  local head = redis.call('ZRANGE', ready, 0, 0, 'WITHSCORES')
  local lowest = below
  if head[2] and (lowest == nil or tonumber(head[2]) < lowest) then
    lowest = tonumber(head[2])
  end
  if lowest == nil then
    return 0
  end
  if lowest <= -MAX_EXACT then -- lowest - 1 would not be exact
    error('ZQ_BAD_ARGUMENT: the front of the line is at the lowest exact score')
  end
  return lowest - 1
end
