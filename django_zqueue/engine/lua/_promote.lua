-- _promote.lua: move up to `limit` due delayed jobs to ready, in a constant number of
-- commands; a due job whose record cannot be used goes to dead letters instead, alone
-- (bury_corrupt). Returns how many were promoted and how many buried.
-- Uses k.delayed, k.ready, k.meta and what bury_corrupt() uses. before_write (optional):
-- called once before its first write, only when some job is due (claim's key checks).
--@include decode_meta
--@include ready_scores
--@include bury_corrupt

local function promote(k, now, limit, mode, aging_us, before_write)
  local due = redis.call('ZRANGEBYSCORE', k.delayed, '-inf', now, 'LIMIT', 0, limit)
  if #due == 0 then
    return 0, 0
  end
  if before_write then
    before_write()
  end
  local raws = redis.call('HMGET', k.meta, unpack(due))
  local entries, ids, bad = {}, {}, {}
  for i, id in ipairs(due) do
    local meta, why = decode_meta(raws[i])
    if meta then
      entries[#entries + 1] = {id, meta}
      ids[#ids + 1] = id
    else
      bad[#bad + 1] = {id, why, raws[i]}
    end
  end
  local scored = nil
  if #entries > 0 then
    scored = ready_scores(k.ctr, entries, mode, aging_us) -- may raise: before any write
    redis.call('ZREM', k.delayed, unpack(ids))
    redis.call('ZADD', k.ready, unpack(scored))
  end
  return #entries, bury_corrupt(k, bad, now, k.delayed)
end
