-- _notify.lua: wake up to `n` blocked consumers; the list never holds more than `cap`
-- tokens. It never raises: a notify key of the wrong type only loses the wake-up (the
-- consumers wait with a timeout; zqueue_doctor reports the key).
--@include count

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
  local ok, len = pcall(redis.call, 'LPUSH', key, unpack(tokens))
  if raise_oom(ok, len) and len > cap then
    redis.call('LTRIM', key, 0, cap - 1)
  end
end
