-- _wf_mark.lua: a job of a workflow (record field `k`: it has dependents; `n`: it waited
-- for parents) that ends (acked, dead, deleted) leaves an entry in its shard's outbox:
-- `out` ZSET id -> now, `res` HASH id -> '1' .. result JSON (ok = true: succeeded; '' =
-- null), '0' .. reason (ok = false: failed; `result` is then the reason, '' or nil =
-- dead, else 'cancelled', 'deleted' or 'expired': what a dependent that takes any end
-- of it is told, see the optional places of wf_resolve) or 'r' (ok = 'r': revived, back to waiting: dependents
-- buried on its account wait again). The dispatcher (queue/flow.py) applies it to the dependents, in their own
-- slots, and then clears it; the scanner finishes what a crash interrupted. A later end
-- (a dead job requeued, then acked) overwrites the entry. Nothing for other jobs.

local function wf_mark(out, res, id, meta, ok, result, now)
  if type(meta) ~= 'table' or not (meta.k or meta.n) then
    return false
  end
  redis.call('ZADD', out, now, id)
  if ok == 'r' then
    redis.call('HSET', res, id, 'r')
  elseif ok then
    if result == nil or result == '' then
      result = 'null'
    end
    redis.call('HSET', res, id, '1' .. result)
  else
    redis.call('HSET', res, id, '0' .. (result or ''))
  end
  return true
end
