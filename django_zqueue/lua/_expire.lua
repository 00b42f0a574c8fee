-- _expire.lua: the terminal state "expired": a job with an expiry (record field `x`, ms
-- on Redis TIME) not started by then never starts.
-- is_lapsed: whether a decoded record's expiry has passed at `now`.
-- expire_jobs: end jobs ({id, meta} entries) that the caller has already taken out of
--   ready, delayed or wait: each is added to k.expired at `now` with its record and body
--   kept (trimmed as dead letters are, scan.lua), its error set to say so, its k.expiry
--   entry removed, counted in stats `jobs_expired`; a workflow job's end is recorded as a
--   failure for its dependents (wf_mark). Returns how many.
--   Uses k.expired, k.expiry, k.errors, k.stats, k.wf_out, k.wf_res.
--@include wf_mark
--@include count
--@include attempts

-- EXPIRED_MAX: most expired (or corrupt) jobs at the head of ready that one claim reads
--   past to reach a ready job (claim.lua, claim_fair.lua); EXPIRED_PAGE: the size of each
--   page read past them (beyond what the batch still needs).
local EXPIRED_MAX = 100
local EXPIRED_PAGE = 16

local function is_lapsed(meta, now)
  return type(meta.x) == 'number' and meta.x <= now
end

local function expire_jobs(k, entries, now)
  if #entries == 0 then
    return 0
  end
  local at, ids, errors = {}, {}, {}
  for _, e in ipairs(entries) do
    at[#at + 1] = now
    at[#at + 1] = e[1]
    ids[#ids + 1] = e[1]
    errors[#errors + 1] = {e[1], string.format('expired: not started by %.0f (ms since the epoch)',
      tonumber(e[2].x) or now)}
  end
  redis.call('ZADD', k.expired, unpack(at))
  redis.call('ZREM', k.expiry, unpack(ids))
  add_attempts(k.errors, now, errors)
  count_stat(k.stats, 'jobs_expired', #entries)
  for _, e in ipairs(entries) do
    wf_mark(k.wf_out, k.wf_res, e[1], e[2], false, 'expired', now)
  end
  return #entries
end
