-- _record.lua: a job's record as stored in the meta HASH (field = the job's id). Two
-- layouts are read:
--   compact: a MessagePack map of the record's fields followed by the job's body, raw,
--     in the one hash field; parse_record puts the body in field `b` of the table;
--   JSON: a JSON object, the body in the body HASH (jobs written before the compact
--     layout; `b` is absent from the table).
-- parse_record(raw, no_body): the record's table, or nil and why it is none. Checks the
--   shape only; decode_meta (_decode_meta.lua) checks the fields. With no_body, `b` is
--   left out (a record read only to be checked or dropped: no copy of its body).
-- encode_record(meta): the value to store, in the layout the record was read in (a JSON
--   record stays JSON, its body where it is), and the record without its body (what
--   claim hands the worker).
-- split_record(raw): a stored record as its fields (the record without its body) and its
--   body; the body is nil for the JSON layout (it is in the body HASH), and a value that
--   does not start with a MessagePack map or array is returned whole, its body nil.
-- fresh_record(fields, raw): a record of `fields` (a table without `b`) that keeps the
--   body of `raw`, a record that could not be used: compact when `raw` is a compact
--   record whose fields unpack (whatever they hold), else JSON (a JSON-layout body stays
--   in the body HASH; the body of a value that does not unpack is lost with it).
-- A record's first byte tells the layout: '{' is JSON; a compact record starts with a
-- MessagePack map header (0x80..0x8f, 0xde, 0xdf).

local function parse_record(raw, no_body)
  if type(raw) ~= 'string' or raw == '' then
    return nil, 'meta missing'
  end
  if string.byte(raw, 1) == 123 then
    local ok, meta = pcall(cjson.decode, raw)
    if not ok then
      return nil, 'meta is not JSON'
    end
    if type(meta) ~= 'table' or meta[1] ~= nil then
      return nil, 'meta is not a JSON object'
    end
    meta.b = nil
    return meta, nil
  end
  local ok, rest, meta = pcall(cmsgpack.unpack_one, raw)
  if not ok or type(meta) ~= 'table' or meta[1] ~= nil then
    return nil, 'meta is not a record'
  end
  if no_body then
    meta.b = nil
  elseif rest == -1 then
    meta.b = ''
  else
    meta.b = string.sub(raw, rest + 1)
  end
  return meta, nil
end

local function encode_record(meta)
  local body = meta.b
  if body == nil then
    local text = cjson.encode(meta)
    return text, text
  end
  meta.b = nil
  local head = cmsgpack.pack(meta)
  meta.b = body
  return head .. body, head
end

-- record_bodies(body, ids, metas, n): the body of each of the n jobs (metas[i], decoded,
-- is the record of ids[i], or nil when it could not be read): its record's `b`, or for the
-- JSON layout its field of the body HASH `body`, read with one HMGET for those only;
-- false where it is missing (or the record unread).
local function record_bodies(body, ids, metas, n)
  local out, need, at = {}, {}, {}
  for i = 1, n do
    local m = metas[i]
    if not m then
      out[i] = false
    elseif m.b then
      out[i] = m.b
    else
      out[i] = false
      need[#need + 1] = ids[i]
      at[#at + 1] = i
    end
  end
  if #need > 0 then
    local got = redis.call('HMGET', body, unpack(need))
    for j, i in ipairs(at) do
      out[i] = got[j]
    end
  end
  return out
end

local function split_record(raw)
  if string.byte(raw, 1) == 123 then
    return raw, nil
  end
  local ok, rest, head = pcall(cmsgpack.unpack_one, raw)
  if not ok or type(head) ~= 'table' then
    return raw, nil
  end
  if rest == -1 then
    return raw, ''
  end
  return string.sub(raw, 1, rest), string.sub(raw, rest + 1)
end

local function fresh_record(fields, raw)
  if raw then
    local _, body = split_record(raw)
    if body then
      return cmsgpack.pack(fields) .. body
    end
  end
  return cjson.encode(fields)
end
