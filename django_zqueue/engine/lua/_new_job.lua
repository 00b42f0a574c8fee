-- _new_job.lua: a new job travels as one argument, a MessagePack map made by
-- django_zqueue/engine/records/spec.py: `id` and `body` (or, for a body of a task's shape, its parts
-- `task`, `args` and `kwargs`, left out when {}: the texts _record.lua's body_parts would
-- cut it into, joined here and stored as they are), then the options it sets, by name:
-- priority, score, delay_ms (from now), run_at_ms (absolute, ms), max_retries,
-- visibility_timeout_ms (its own lease), group, weight (its group's weight in a fair
-- queue), expires_in_ms (from now) or expires_at_ms (absolute; with both, the earlier):
-- a job not started by then ends "expired" (record field `x`, indexed in k.expiry);
-- ordering_key (record field `o`: the key's jobs are claimed one at a time, claim.lua)
-- and on_dead ('skip', record field `od` = 1; 'block', the default, is not stored);
-- layout = 'json' (its record in the JSON layout, its body in k.body; absent: the
-- compact record, body in field `b` of the record read_job gives); a script may take more (publish_once: debounce_ms, unique_ms; wf_publish: need,
-- kids, parents). An option left out takes its default. The options' names: JOB_OPTIONS
-- (_job_options.lua), their bounds: bound() (_bounds.lua), both generated from
-- django_zqueue/conf/bounds.py.
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
--@include job_options
--@include fmt
--@include ready_scores
--@include record

-- the fields of a job map besides its options (JOB_OPTIONS: true for a text, or the
-- bounds of a number, {lo, hi, whole}): its id and body (or the body's parts), its layout
local FRAME_FIELDS = {id = true, body = true, task = true, args = true, kwargs = true,
  layout = true}
local ID_MIN, ID_MAX = bound('id_bytes')
local GROUP_MIN, GROUP_MAX = bound('group_bytes')
local ORDER_MIN, ORDER_MAX = bound('ordering_key_bytes')

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

-- why x, option `name`, is out of its bounds (lowest, highest, integer only), or nil
local function outside(name, x, lo, hi, whole)
  if type(x) == 'number' and x >= lo and x <= hi and not (whole and x % 1 ~= 0) then
    return nil
  end
  return string.format('%s must be %s in [%.15g, %.15g]', name,
    whole and 'an integer' or 'a number', lo, hi)
end

-- why field `name` of j is out of its bounds, or nil (absent is within them)
local function out_of_bounds(j, name)
  local x = j[name]
  if x == nil then
    return nil
  end
  return outside(name, x, bound(name))
end

local function read_job(j, now, more)
  for name, x in pairs(j) do
    local b = JOB_OPTIONS[name] or FRAME_FIELDS[name]
    if b ~= true then
      if b then -- only the options given are checked
        local why = outside(name, x, b[1], b[2], b[3])
        if why then
          return nil, nil, why
        end
      elseif not (more and more[name]) then
        return nil, nil, "unknown job field '" .. tostring(name) .. "'"
      end
    end
  end
  local id, body, parts = j.id, j.body, nil
  local t, a, kw = j.task, j.args, j.kwargs
  if t ~= nil or a ~= nil or kw ~= nil then -- a body given as its parts (texts)
    if body ~= nil or type(t) ~= 'string' or type(a) ~= 'string'
        or (kw ~= nil and type(kw) ~= 'string') then
      return nil, nil, 'a job has a body, or its parts task and args (and kwargs), as texts'
    end
    body = BODY_TASK .. t .. BODY_ARGS .. a .. BODY_KWARGS .. (kw or '{}') .. '}'
    parts = {body, t, a, kw} -- stored as they are, not split again (encode_record)
  end
  if type(id) ~= 'string' or #id < ID_MIN or #id > ID_MAX or type(body) ~= 'string' then
    return nil, nil, 'a job needs an id of 1 to ' .. ID_MAX .. ' bytes and a body'
  end
  local layout, meta = j.layout, nil
  -- one constructor: a table made at its size (a field added later grows it; T and A
  -- hold the slots encode_record sets the parts in)
  if layout == nil then -- the compact layout: the body in the record (_record.lua)
    meta = {m = j.max_retries or 0, e = now, b = body, [PARTS] = parts, T = nil, A = nil}
  elseif layout == 'json' then
    meta = {m = j.max_retries or 0, e = now}
    j.body = body -- the callers write a JSON-layout job's body from j
  else
    return nil, nil, "layout must be 'json' or absent"
  end
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
    if type(g) ~= 'string' or #g < GROUP_MIN or #g > GROUP_MAX or string.find(g, '\0', 1, true) then
      return nil, nil, 'group must be 1 to ' .. GROUP_MAX .. ' bytes, without NUL'
    end
    meta.g = g
  end
  if j.weight and j.weight ~= 1 then
    meta.w = j.weight
  end
  local o, od = j.ordering_key, j.on_dead
  if o ~= nil then
    if type(o) ~= 'string' or #o < ORDER_MIN or #o > ORDER_MAX or string.find(o, '\0', 1, true) then
      return nil, nil, 'ordering_key must be 1 to ' .. ORDER_MAX .. ' bytes, without NUL'
    end
    meta.o = o
  end
  if od ~= nil then
    if od ~= 'block' and od ~= 'skip' then
      return nil, nil, "on_dead must be 'block' or 'skip'"
    end
    if o == nil then
      return nil, nil, 'on_dead needs an ordering_key'
    end
    if od == 'skip' then
      meta.od = 1
    end
  end
  local x = j.expires_at_ms
  if j.expires_in_ms and not (x and x < now + j.expires_in_ms) then
    x = now + j.expires_in_ms
  end
  if x then
    meta.x = x
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
