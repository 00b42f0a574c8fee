-- _bury_corrupt.lua: move jobs whose records cannot be used to dead letters, each on its
-- own account: `bad` is a list of {id, reason, raw meta}. The error of each becomes
-- 'corrupt record: <reason>' followed by its raw meta (kept for the operator, every byte
-- outside printable ASCII, and the backslash, written \xNN: the text stays UTF-8); its meta
-- becomes a minimal valid record {a = 0, m = 0, e = now}, so every reader of dead
-- letters can show it, and a requeue runs it once; its body is kept (fresh_record).
-- `from`: the ZSET they are removed from (nil: the caller removed them). Uses k.dead,
-- k.errors, k.meta, k.ctr, k.stats and, when set, k.progress. Returns how many.
--@include tick_us
--@include fmt
--@include series
--@include count
--@include record
--@include attempts

local function printable(raw)
  if not raw then
    return '(none)'
  end
  return (string.gsub(raw, '.', function(c)
    local b = string.byte(c)
    if b < 32 or b > 126 or b == 92 then
      return string.format('\\x%02x', b)
    end
  end))
end

local function bury_corrupt(k, bad, now, from)
  local n = #bad
  if n == 0 then
    return 0
  end
  local us = tick_us(k.ctr, 'dclock') -- time of death with a µs fraction, as retry_or_bury()
  if n > 1 then
    redis.call('HSET', k.ctr, 'dclock', fmt(us + n - 1))
  end
  local fresh = {a = 0, m = 0, e = now}
  local ids, errors, metas, dead = {}, {}, {}, {}
  for i, b in ipairs(bad) do
    local id = b[1]
    ids[i] = id
    errors[i] = {id, 'corrupt record: ' .. b[2] .. '\nraw meta: ' .. printable(b[3])}
    metas[#metas + 1] = id
    metas[#metas + 1] = fresh_record(fresh, b[3])
    dead[#dead + 1] = fmt((us + i - 1) / 1000)
    dead[#dead + 1] = id
  end
  if from then
    redis.call('ZREM', from, unpack(ids))
  end
  if k.progress then
    soft('HDEL', k.progress, unpack(ids))
  end
  add_attempts(k.errors, now, errors)
  redis.call('HSET', k.meta, unpack(metas))
  redis.call('ZADD', k.dead, unpack(dead))
  count_stat(k.stats, 'dead', n)
  count_stat(k.stats, 'corrupt', n)
  bump(k.stats, 'd', n, now)
  return n
end
