-- _trim_dead.lua: remove dead letters older than ttl_ms and beyond max_count, at most
-- `limit` in all. Returns how many were removed and whether more remain to trim.
-- Reads no record: a corrupt one is trimmed like any other.
--@include fmt
--@include drop_record

local function trim_dead(dead, body, meta, errors, progress, now, max_count, ttl_ms, limit)
  local removed = 0
  local old = redis.call('ZRANGEBYSCORE', dead, '-inf', '(' .. fmt(now - ttl_ms), 'LIMIT', 0, limit)
  for _, id in ipairs(old) do
    redis.call('ZREM', dead, id)
    drop_record(body, meta, errors, progress, id)
    removed = removed + 1
  end
  local more = (#old == limit)
  local excess = redis.call('ZCARD', dead) - max_count
  if excess > 0 then
    local room = limit - removed
    if excess > room then
      more = true
      excess = room
    end
    if excess > 0 then
      local ids = redis.call('ZRANGE', dead, 0, excess - 1)
      for _, id in ipairs(ids) do
        redis.call('ZREM', dead, id)
        drop_record(body, meta, errors, progress, id)
        removed = removed + 1
      end
    end
  end
  return removed, more
end
