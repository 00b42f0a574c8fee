-- _notify.lua: wake up to `n` blocked consumers; the list never holds more than `cap`
-- tokens.

local function notify(key, n, cap)
  if n <= 0 then
    return
  end
  if n > cap then
    n = cap
  end
  local tokens = {}
  for i = 1, n do
    tokens[i] = '1'
  end
  if redis.call('LPUSH', key, unpack(tokens)) > cap then
    redis.call('LTRIM', key, 0, cap - 1)
  end
end
