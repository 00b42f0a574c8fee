-- _new_job.lua: a new job is given as 10 consecutive arguments starting at a[b]: id,
-- body, priority, score ('' = computed), delay_ms ('' = none), run_at_ms ('' = none;
-- absolute), max_retries, visibility_ms ('' = the queue's), group ('' = none), weight
-- ('' = 1: its group's weight in a fair queue).
-- check_job: nil when the arguments make a job, else why not (the caller raises
--   ZQ_BAD_ARGUMENT before any write).
-- new_record: its record and its run-at (nil: ready now). Priority 0 and attempts 0 are
--   left out (absent = 0): 16 bytes less per waiting job.
-- add_job: write one new job; the caller has checked the tag is free and the arguments.
--@include bounds
--@include fmt
--@include ready_scores

local function check_job(a, b, now)
  local function num(i)
    return tonumber(a[b + i])
  end
  if a[b] == nil or a[b] == '' or a[b + 1] == nil then
    return 'a job needs an id and a body'
  end
  if not is_int(num(2), -1000, 1000) then
    return 'priority must be an integer in [-1000, 1000]'
  end
  if a[b + 3] ~= '' and not (num(3) and math.abs(num(3)) <= MAX_EXACT) then
    return 'score must be a number within 2^53'
  end
  if a[b + 4] ~= '' and not is_int(num(4), -MAX_EXACT, MAX_DELAY_MS) then
    return 'delay_ms must be an integer of at most ' .. MAX_DELAY_MS
  end
  -- run_at is the client's reading of the time: a day of clock skew is let through
  if a[b + 5] ~= '' and not is_int(num(5), 0, now + MAX_DELAY_MS + 86400000) then
    return 'run_at_ms must be an integer within the delay horizon'
  end
  if not is_int(num(6), 0, MAX_RETRIES) then
    return 'max_retries must be an integer in [0, ' .. MAX_RETRIES .. ']'
  end
  if a[b + 7] ~= '' and not is_int(num(7), MIN_LEASE_MS, MAX_LEASE_MS) then
    return 'visibility_ms must be an integer in [' .. MIN_LEASE_MS .. ', ' .. MAX_LEASE_MS .. ']'
  end
  if a[b + 8] ~= '' and (a[b + 8] == nil or #a[b + 8] > 200 or string.find(a[b + 8], '\0')) then
    return 'group must be at most 200 bytes, without NUL'
  end
  if a[b + 9] ~= '' and not (num(9) and num(9) >= 0.001 and num(9) <= 1000) then
    return 'weight must be a number in [0.001, 1000]'
  end
  return nil
end

local function new_record(a, b, now)
  local meta = {m = tonumber(a[b + 6]), e = now}
  if a[b + 2] ~= '0' then
    meta.p = tonumber(a[b + 2])
  end
  if a[b + 3] ~= '' then
    meta.s = a[b + 3]
  end
  if a[b + 7] ~= '' then
    meta.v = tonumber(a[b + 7])
  end
  if a[b + 8] ~= '' then
    meta.g = a[b + 8]
  end
  if a[b + 9] ~= '' and a[b + 9] ~= '1.0' then
    meta.w = tonumber(a[b + 9])
  end
  local run_at = nil
  if a[b + 4] ~= '' then
    run_at = now + tonumber(a[b + 4])
  elseif a[b + 5] ~= '' then
    run_at = tonumber(a[b + 5])
  end
  return meta, run_at
end

local function add_job(k, a, b, now, mode, aging_us)
  local id, body = a[b], a[b + 1]
  local meta, run_at = new_record(a, b, now)
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
