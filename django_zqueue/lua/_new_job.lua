-- _new_job.lua: a new job is given as 10 consecutive arguments starting at a[b]: id,
-- body, priority, score ('' = computed), delay_ms ('' = none), run_at_ms ('' = none;
-- absolute), max_retries, visibility_ms ('' = the queue's), group ('' = none), weight
-- ('' = 1: its group's weight in a fair queue).
-- read_job: its record and its run-at (nil: ready now), each argument read and checked
--   once; or nil, nil and why the arguments make no job (the caller raises
--   ZQ_BAD_ARGUMENT before any write). Priority 0 and attempts 0 are left out of the
--   record (absent = 0): 16 bytes less per waiting job.
-- add_job: write one new job, from read_job's record and run-at; the caller has checked
--   that the tag is free.
--@include bounds
--@include fmt
--@include ready_scores

local function read_job(a, b, now)
  local id, body = a[b], a[b + 1]
  if id == nil or id == '' or body == nil then
    return nil, nil, 'a job needs an id and a body'
  end
  local raw = a[b + 6]
  local m = tonumber(raw)
  local meta = {m = m, e = now}
  raw = a[b + 2]
  if raw ~= '0' then
    local p = tonumber(raw)
    if not is_int(p, -1000, 1000) then
      return nil, nil, 'priority must be an integer in [-1000, 1000]'
    end
    if p ~= 0 then
      meta.p = p
    end
  end
  raw = a[b + 3]
  if raw ~= '' then
    local s = tonumber(raw)
    if not (s and math.abs(s) <= MAX_EXACT) then
      return nil, nil, 'score must be a number within 2^53'
    end
    meta.s = raw
  end
  local d, run_at = nil, nil
  raw = a[b + 4]
  if raw ~= '' then
    d = tonumber(raw)
    if not is_int(d, -MAX_EXACT, MAX_DELAY_MS) then
      return nil, nil, 'delay_ms must be an integer of at most ' .. MAX_DELAY_MS
    end
  end
  raw = a[b + 5]
  if raw ~= '' then
    -- run_at is the client's reading of the time: a day of clock skew is let through
    run_at = tonumber(raw)
    if not is_int(run_at, 0, now + MAX_DELAY_MS + 86400000) then
      return nil, nil, 'run_at_ms must be an integer within the delay horizon'
    end
  end
  if d then -- a delay wins over a run-at
    run_at = now + d
  end
  if not is_int(m, 0, MAX_RETRIES) then
    return nil, nil, 'max_retries must be an integer in [0, ' .. MAX_RETRIES .. ']'
  end
  raw = a[b + 7]
  if raw ~= '' then
    local v = tonumber(raw)
    if not is_int(v, MIN_LEASE_MS, MAX_LEASE_MS) then
      return nil, nil, 'visibility_ms must be an integer in [' .. MIN_LEASE_MS .. ', ' ..
        MAX_LEASE_MS .. ']'
    end
    meta.v = v
  end
  raw = a[b + 8]
  if raw ~= '' then
    if raw == nil or #raw > 200 or string.find(raw, '\0', 1, true) then
      return nil, nil, 'group must be at most 200 bytes, without NUL'
    end
    meta.g = raw
  end
  raw = a[b + 9]
  if raw ~= '' then
    local w = tonumber(raw)
    if not (w and w >= 0.001 and w <= 1000) then
      return nil, nil, 'weight must be a number in [0.001, 1000]'
    end
    if raw ~= '1.0' then
      meta.w = w
    end
  end
  return meta, run_at, nil
end

local function add_job(k, id, body, meta, run_at, now, mode, aging_us)
  local score = nil
  if not (run_at and run_at > now) then
    score = fmt(ready_score(k.ctr, meta, mode, aging_us)) -- may raise: before the writes
  end
  redis.call('HSET', k.body, id, body)
  redis.call('HSET', k.meta, id, cjson.encode(meta))
  if score then
    redis.call('ZADD', k.ready, score, id)
  else
    redis.call('ZADD', k.delayed, run_at, id)
  end
end
