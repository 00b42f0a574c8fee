-- _expire.lua: the terminal state "expired": a job with an expiry (record field `x`, ms
-- on Redis TIME) not started by then never starts.
-- is_lapsed: whether a decoded record's expiry has passed at `now`.
-- expire_jobs: end jobs ({id, meta} entries) that the caller has already taken out of
--   ready, delayed or wait: each is added to k.expired at `now` with its record and body
--   kept (trimmed as dead letters are, scan.lua), its error set to say so, its k.expiry
--   entry removed, counted in stats `jobs_expired`; a workflow job's end is recorded as a
--   failure for its dependents (wf_mark). Returns how many.
--   Uses k.expired, k.expiry, k.errors, k.stats, k.wf_out, k.wf_res.
-- utc_text(ms): ms since the epoch as 'YYYY-MM-DD HH:MM:SS.mmm UTC' (the civil date of
--   its day count, H. Hinnant's days -> date), for the expired job's error.
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

local function utc_text(ms)
  ms = math.floor(ms)
  local secs = math.floor(ms / 1000)
  local days = math.floor(secs / 86400)
  local rest = secs - days * 86400
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524)
    - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local day = doy - math.floor((153 * mp + 2) / 5) + 1
  local month = mp < 10 and mp + 3 or mp - 9
  local year = yoe + era * 400 + (month <= 2 and 1 or 0)
  return string.format('%04d-%02d-%02d %02d:%02d:%02d.%03d UTC', year, month, day,
    math.floor(rest / 3600), math.floor(rest % 3600 / 60), rest % 60, ms - secs * 1000)
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
    errors[#errors + 1] = {e[1], 'expired: not started by ' .. utc_text(tonumber(e[2].x) or now)}
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
