-- _now_ms.lua: Redis TIME in milliseconds (never a client clock). ms_of: the ms of a
-- TIME reply (for a script that also needs its microseconds).
local function ms_of(t)
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function now_ms()
  return ms_of(redis.call('TIME'))
end
