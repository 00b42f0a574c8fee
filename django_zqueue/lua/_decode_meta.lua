-- _decode_meta.lua: a job record (a meta HASH value) decoded and checked before any
-- script writes on its account: returns meta, or nil and the reason it cannot be used
-- (not JSON, not an object, a field of the wrong type or out of bounds). Absent fields
-- are allowed (absent = 0); unknown fields are kept as they are.
--@include bounds

local META_INTS = { -- field, lowest, highest
  {'a', 0, MAX_RETRIES + 1}, {'m', 0, MAX_RETRIES}, {'p', -1000, 1000}, {'t', 1, MAX_EXACT},
  {'e', 0, MAX_EXACT}, {'st', 0, MAX_EXACT}, {'v', MIN_LEASE_MS, MAX_LEASE_MS},
  {'n', 0, 10000}, -- parents a workflow job waits for (links.MAX_LINKS)
}
local function decode_meta(raw)
  if not raw then
    return nil, 'meta missing'
  end
  local ok, meta = pcall(cjson.decode, raw)
  if not ok then
    return nil, 'meta is not JSON'
  end
  if type(meta) ~= 'table' or meta[1] ~= nil then
    return nil, 'meta is not a JSON object'
  end
  for _, f in ipairs(META_INTS) do
    local x = meta[f[1]]
    if x ~= nil and not is_int(x, f[2], f[3]) then
      return nil, string.format("meta field '%s' is not an integer in [%.0f, %.0f]", f[1], f[2], f[3])
    end
  end
  for _, name in ipairs({'s', 'q'}) do -- scores, kept as strings
    local x = meta[name]
    if x ~= nil then
      local n = (type(x) == 'string' or type(x) == 'number') and tonumber(x)
      if not n or n ~= n or math.abs(n) > MAX_EXACT then
        return nil, string.format("meta field '%s' is not a score", name)
      end
    end
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
