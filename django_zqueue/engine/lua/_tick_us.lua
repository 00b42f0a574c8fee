-- _tick_us.lua: a strictly increasing server clock in microseconds, kept in HASH ctr
-- under `field`: Redis TIME, or one more than the last value when TIME has not moved on.
--@include fmt

local function tick_us(ctr, field)
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local last = tonumber(redis.call('HGET', ctr, field) or '0')
  if us <= last then
    us = last + 1
  end
  redis.call('HSET', ctr, field, fmt(us))
  return us
end
