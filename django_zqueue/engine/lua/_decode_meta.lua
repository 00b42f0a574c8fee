-- _decode_meta.lua: a job record (a meta HASH value) decoded and checked before any
-- script writes on its account: returns meta, or nil and the reason it cannot be used
-- (not JSON, not an object, a field of the wrong type or out of bounds). Absent fields
-- are allowed (absent = 0); unknown fields are kept as they are. Either layout of
-- _record.lua is read; the body of a compact record is in field `b`.
--@include bounds
--@include record

local function int_ok(x, lo, hi) -- absent, or an integer in [lo, hi]
  return x == nil or (type(x) == 'number' and x % 1 == 0 and x >= lo and x <= hi)
end

local function score_ok(x) -- absent, or a finite score within 2^53 (kept as a string)
  if x == nil then
    return true
  end
  local n = (type(x) == 'string' or type(x) == 'number') and tonumber(x)
  return n and n == n and math.abs(n) <= MAX_EXACT
end

-- the integer fields, with their bounds, named in the reason a record is refused (made
-- only then: this runs for every job a script reads)
local function bad_int(meta)
  for _, f in ipairs({ -- field, lowest, highest
    {'a', 0, MAX_RETRIES + 1}, {'m', 0, MAX_RETRIES}, {'p', PRIORITY_MIN, PRIORITY_MAX}, {'t', 1, MAX_EXACT},
    {'e', 0, MAX_EXACT}, {'st', 0, MAX_EXACT}, {'v', MIN_LEASE_MS, MAX_LEASE_MS},
    {'n', 0, MAX_LINKS}, -- parents a workflow job waits for
  }) do
    if not int_ok(meta[f[1]], f[2], f[3]) then
      return string.format("meta field '%s' is not an integer in [%.0f, %.0f]", f[1], f[2], f[3])
    end
  end
end

local function decode_meta(raw)
  local meta, why = parse_record(raw)
  if not meta then
    return nil, why
  end
  -- each field read once; the checks are called only for the fields present (a record
  -- holds a few of them: this runs for every job a script reads)
  local a, m, p, t, e, st, v, n = meta.a, meta.m, meta.p, meta.t, meta.e, meta.st, meta.v, meta.n
  if (a ~= nil and not int_ok(a, 0, MAX_RETRIES + 1)) or (m ~= nil and not int_ok(m, 0, MAX_RETRIES))
    or (p ~= nil and not int_ok(p, PRIORITY_MIN, PRIORITY_MAX)) or (t ~= nil and not int_ok(t, 1, MAX_EXACT))
    or (e ~= nil and not int_ok(e, 0, MAX_EXACT)) or (st ~= nil and not int_ok(st, 0, MAX_EXACT))
    or (v ~= nil and not int_ok(v, MIN_LEASE_MS, MAX_LEASE_MS))
    or (n ~= nil and not int_ok(n, 0, MAX_LINKS)) then
    return nil, bad_int(meta)
  end
  local s, q, ps = meta.s, meta.q, meta.ps
  if s ~= nil and not score_ok(s) then
    return nil, "meta field 's' is not a score"
  end
  if q ~= nil and not score_ok(q) then
    return nil, "meta field 'q' is not a score"
  end
  if ps ~= nil and not score_ok(ps) then -- its score while set aside by its group's limit
    return nil, "meta field 'ps' is not a score"
  end
  local c, g, w, f = meta.c, meta.g, meta.w, meta.f
  if c ~= nil and type(c) ~= 'string' then
    return nil, "meta field 'c' is not a string"
  end
  if g ~= nil and (type(g) ~= 'string' or #g > MAX_GROUP_BYTES) then
    return nil, "meta field 'g' is not a group key"
  end
  if w ~= nil and not (type(w) == 'number' and w >= MIN_WEIGHT and w <= MAX_WEIGHT) then
    return nil, "meta field 'w' is not a weight in [" .. MIN_WEIGHT .. ', ' .. MAX_WEIGHT .. ']'
  end
  local o = meta.o
  if o ~= nil and type(o) ~= 'string' then -- its ordering key (claim.lua)
    return nil, "meta field 'o' is not an ordering key"
  end
  if f ~= nil and type(f) ~= 'table' then -- failed parents (wf_resolve.lua)
    return nil, "meta field 'f' is not a list"
  end
  return meta, nil
end
