-- _decode_meta.lua: a job record (a meta HASH value) decoded and checked before any
-- script writes on its account: returns meta, or nil and the reason it cannot be used
-- (not JSON, not an object, a field of the wrong type or out of bounds). Absent fields
-- are allowed (absent = 0); unknown fields are kept as they are. Either layout of
-- _record.lua is read; the body of a compact record is in field `b`.
--@include bounds
--@include record

local function int_ok(x, lo, hi) -- absent, or an integer in [lo, hi]
  return x == nil or (type(x) == 'number' and x == math.floor(x) and x >= lo and x <= hi)
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
  if not (int_ok(meta.a, 0, MAX_RETRIES + 1) and int_ok(meta.m, 0, MAX_RETRIES)
    and int_ok(meta.p, -1000, 1000) and int_ok(meta.t, 1, MAX_EXACT)
    and int_ok(meta.e, 0, MAX_EXACT) and int_ok(meta.st, 0, MAX_EXACT)
    and int_ok(meta.v, MIN_LEASE_MS, MAX_LEASE_MS) and int_ok(meta.n, 0, 10000)) then
    return nil, bad_int(meta)
  end
  if not score_ok(meta.s) then
    return nil, "meta field 's' is not a score"
  end
  if not score_ok(meta.q) then
    return nil, "meta field 'q' is not a score"
  end
  if not score_ok(meta.ps) then -- its score while set aside by its group's limit
    return nil, "meta field 'ps' is not a score"
  end
  if meta.c ~= nil and type(meta.c) ~= 'string' then
    return nil, "meta field 'c' is not a string"
  end
  if meta.g ~= nil and (type(meta.g) ~= 'string' or #meta.g > 200) then
    return nil, "meta field 'g' is not a group key"
  end
  if meta.w ~= nil and not (type(meta.w) == 'number' and meta.w >= 0.001 and meta.w <= 1000) then
    return nil, "meta field 'w' is not a weight in [0.001, 1000]"
  end
  if meta.f ~= nil and type(meta.f) ~= 'table' then -- failed parents (wf_resolve.lua)
    return nil, "meta field 'f' is not a list"
  end
  return meta, nil
end
