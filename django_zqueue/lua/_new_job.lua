-- _new_job.lua: a new job travels as one argument, a MessagePack map made by
-- django_zqueue/jobspec.py: `id` and `body` (or, for a body of a task's shape, its parts
-- `task`, `args` and `kwargs`, left out when {}: the texts _record.lua's body_parts would
-- cut it into, joined here and stored as they are), then the options it sets, by name:
-- priority, score, delay_ms (from now), run_at_ms (absolute, ms), max_retries,
-- visibility_timeout_ms (its own lease), group, weight (its group's weight in a fair
-- queue), expires_in_ms (from now) or expires_at_ms (absolute; with both, the earlier):
-- a job not started by then ends "expired" (record field `x`, indexed in k.expiry);
-- layout = 'json' (its record in the JSON layout, its body in k.body; absent: the
-- compact record, body in field `b` of the record read_job gives); a script may take more (publish_once: debounce_ms, unique_ms; wf_publish: need,
-- kids, parents). An option left out takes its default. Bounds: bound() (_bounds.lua,
-- generated from django_zqueue/bounds.py).
-- job_spec: the decoded map of one job argument, or nil and why it is none.
-- read_job: from a decoded map, the job's record and run-at (nil: ready now), each field
--   read and checked once; or nil, nil and why the map makes no job (the caller raises
--   ZQ_BAD_ARGUMENT before any write). `more` names the fields the caller takes beyond
--   the common ones; any other field is refused, so an option this version does not
--   know is never dropped in silence. Priority 0 and attempts 0 are left out of the
--   record (absent = 0).
-- add_job: write one new job (one compact record, _record.lua), from read_job's record
--   and run-at; the caller has checked that the tag is free. index_expiry: add the expiry of jobs that have one
--   ({id, meta} entries) to k.expiry, for the scanner.
--@include bounds
--@include fmt
--@include ready_scores
--@include record

-- the fields read_job takes: 'number' for a number with bounds (bound()), true otherwise
-- (a table the library builds once)
local JOB_FIELDS = {id = true, body = true, task = true, args = true, kwargs = true,
  priority = 'number', score = 'number', delay_ms = 'number', run_at_ms = 'number',
  max_retries = 'number', visibility_timeout_ms = 'number', group = true,
  weight = 'number', expires_in_ms = 'number', expires_at_ms = 'number', layout = true}

local function job_spec(raw)
  if type(raw) ~= 'string' or raw == '' then
    return nil, 'a job argument is missing'
  end
  local ok, j = pcall(cmsgpack.unpack, raw)
  if not ok or type(j) ~= 'table' then
    return nil, 'a job argument must be a MessagePack map'
  end
  return j, nil
end

-- why a field is out of its bounds, or nil (absent is within them)
local function out_of_bounds(j, name)
  local x = j[name]
  if x == nil then
    return nil
  end
  local lo, hi, whole = bound(name)
  if type(x) == 'number' and x >= lo and x <= hi and not (whole and x ~= math.floor(x)) then
    return nil
  end
  return string.format('%s must be %s in [%.15g, %.15g]', name,
    whole and 'an integer' or 'a number', lo, hi)
end

-- a body given as its parts (task, args, kwargs: texts; kwargs absent for {}): the
-- body they make, and the parts for encode_record (_record.lua), or nil and why
local function joined_body(j)
  local t, a, kw = j.task, j.args, j.kwargs
  if j.body ~= nil or type(t) ~= 'string' or type(a) ~= 'string'
      or (kw ~= nil and type(kw) ~= 'string') then
    return nil, 'a job has a body, or its parts task and args (and kwargs), as texts'
  end
  local body = BODY_TASK .. t .. BODY_ARGS .. a .. BODY_KWARGS .. (kw or '{}') .. '}'
  return body, {body, t, a, kw}
end

local function read_job(j, now, more)
  for name in pairs(j) do
    local kind = JOB_FIELDS[name]
    if kind == 'number' then -- only the options given are checked
      local why = out_of_bounds(j, name)
      if why then
        return nil, nil, why
      end
    elseif not (kind or (more and more[name])) then
      return nil, nil, "unknown job field '" .. tostring(name) .. "'"
    end
  end
  local parts = nil
  if j.task ~= nil or j.args ~= nil or j.kwargs ~= nil then
    local body, cut = joined_body(j)
    if not body then
      return nil, nil, cut
    end
    j.body, parts = body, cut -- the callers read the body from j
  end
  local id, body = j.id, j.body
  local lo, hi = bound('id_bytes')
  if type(id) ~= 'string' or #id < lo or #id > hi or type(body) ~= 'string' then
    return nil, nil, 'a job needs an id of 1 to ' .. hi .. ' bytes and a body'
  end
  local meta = {m = j.max_retries or 0, e = now}
  if j.priority and j.priority ~= 0 then
    meta.p = j.priority
  end
  if j.score then
    meta.s = fmt(j.score)
  end
  local run_at = j.run_at_ms
  -- run_at is the client's reading of the time: a day of clock skew is let through
  if run_at and run_at > now + MAX_DELAY_MS + 86400000 then
    return nil, nil, 'run_at_ms must be within the delay horizon'
  end
  if j.delay_ms then -- a delay wins over a run-at
    run_at = now + j.delay_ms
  end
  if j.visibility_timeout_ms then -- (a field set to nil would add a slot to the table)
    meta.v = j.visibility_timeout_ms
  end
  local g = j.group
  if g ~= nil then
    local glo, ghi = bound('group_bytes')
    if type(g) ~= 'string' or #g < glo or #g > ghi or string.find(g, '\0', 1, true) then
      return nil, nil, 'group must be 1 to ' .. ghi .. ' bytes, without NUL'
    end
    meta.g = g
  end
  if j.weight and j.weight ~= 1 then
    meta.w = j.weight
  end
  local x = j.expires_at_ms
  if j.expires_in_ms and not (x and x < now + j.expires_in_ms) then
    x = now + j.expires_in_ms
  end
  if x then
    meta.x = x
  end
  if j.layout == nil then -- the compact layout: the body in the record (_record.lua)
    meta.b = body
    if parts then -- given as parts: stored as they are, not split again
      meta[PARTS] = parts
    end
  elseif j.layout ~= 'json' then
    return nil, nil, "layout must be 'json' or absent"
  end
  return meta, run_at, nil
end

local function index_expiry(k, entries)
  local add = {}
  for _, e in ipairs(entries) do
    if e[2].x then
      add[#add + 1] = e[2].x
      add[#add + 1] = e[1]
    end
  end
  if #add > 0 then
    redis.call('ZADD', k.expiry, unpack(add))
  end
end

local function add_job(k, id, body, meta, run_at, now, mode, aging_us)
  local score = nil
  if not (run_at and run_at > now) then
    score = fmt(ready_score(k.ctr, meta, mode, aging_us)) -- may raise: before the writes
  end
  if meta.b == nil then -- the JSON layout: the body apart (a first write: it may fail)
    redis.call('HSET', k.body, id, body)
  end
  redis.call('HSET', k.meta, id, (encode_record(meta)))
  if score then
    redis.call('ZADD', k.ready, score, id)
  else
    redis.call('ZADD', k.delayed, run_at, id)
  end
  index_expiry(k, {{id, meta}})
end
