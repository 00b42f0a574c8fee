-- _notify.lua: wake up to `n` blocked consumers; the list never holds more than `cap`
-- tokens (a list already holding `cap` costs one LLEN and no write). It never raises: a notify key of the wrong type only loses the wake-up (the
-- consumers wait with a timeout; zqueue_doctor reports the key).
--@include count

local function notify(key, n, cap)
  if n <= 0 then
    return
  end
  -- the tokens not yet taken first: a list already at its cap gets nothing (one read,
  -- no write: the common case when no consumer waits), and no push goes past the cap,
  -- so the list is never trimmed
  local ok, len = pcall(redis.call, 'LLEN', key)
  if not ok then -- a key of the wrong type: the wake-up is lost (see above)
    return
  end
  if n > cap - len then
    n = cap - len
  end
  if n <= 0 then
    return
  end
  local tokens = {}
  for i = 1, n do
    tokens[i] = '1'
  end
  raise_oom(pcall(redis.call, 'LPUSH', key, unpack(tokens)))
end
