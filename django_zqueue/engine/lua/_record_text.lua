-- _record_text.lua: read a top-level field of a job record (meta JSON) from its text,
-- without decoding it. A field name is found only right after `{` or `,`: inside a JSON
-- string every quote is escaped, so no string value (a consumer id, say) can fake one.
-- A nested object's field would match too: callers only use it where a false match is
-- safe (it sends the job down the decoding path).

-- is `"name":value` in `raw`, `value` (text) followed by `,` or `}`?
local function text_field_is(raw, name, value)
  local field = '"' .. name .. '":' .. value
  local at = string.find(raw, field, 1, true)
  while at do
    local before = string.sub(raw, at - 1, at - 1)
    local after = string.sub(raw, at + #field, at + #field)
    if (before == '{' or before == ',') and (after == ',' or after == '}') then
      return true
    end
    at = string.find(raw, field, at + 1, true)
  end
  return false
end

-- does `raw` hold a field `name` (any value)?
local function text_has_field(raw, name)
  local field = '"' .. name .. '":'
  local at = string.find(raw, field, 1, true)
  while at do
    local before = string.sub(raw, at - 1, at - 1)
    if before == '{' or before == ',' then
      return true
    end
    at = string.find(raw, field, at + 1, true)
  end
  return false
end
