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
--   record stays JSON, its body where it is), and the record without its body (with
--   body parts, the stored value: readers skip the parts).
-- encode_leased(meta): encode_record's value for the record of a job just leased (claim),
--   in an order ack_many reads without unpacking it (leased_token): compact layout and
--   at most 15 fields: a map16 header (which cmsgpack and recordcodec never write for
--   so few entries: the mark of this order), `t` first, then those of LEASED_FIRST present
--   (`u`, `k`, `n`, `d`: the fields only ack.lua handles), then the others. Otherwise
--   (JSON layout, no `t`, more fields) encode_record's value.
-- lease_value(raw, meta, t, a, q, call): the value claim stores for a job it leases,
--   whose table is `meta` (decode_meta) and stored record `raw` (false: `meta` was
--   changed since, read it as the table), with the lease's fields t (token), a
--   (attempt), q (place in line), and c (consumer) and st (start ms) from `call`,
--   {c = c, st = st}, one table for the jobs of a claim (their encoding is kept in it).
--   A compact record of at most 10 fields holding none of these nor of LEASED_FIRST is
--   spliced: encode_leased's map16 header, `t` and the lease's other fields, then the
--   stored fields and body as they are (nothing unpacked or packed again: the same
--   record as encode_leased's, its fields in another order). Otherwise the fields are
--   set on `meta` and it is encode_leased; on the splice `meta` is left as it was.
--   A field whose value is a MessagePack nil reads as absent, so `meta` cannot tell
--   whether the stored map names one of these fields (a record edited by hand, say):
--   spliced, the map would name it twice and the later nil would win. So a record whose
--   bytes hold a nil (0xc0) anywhere is not spliced (no script writes one; the byte can
--   also come inside a number or a body, and such a record is packed whole, as before).
-- leased_token(raw, tok): for a record of encode_leased's order, whether its `t` is `tok`
--   (a number) and whether it has a field of LEASED_FIRST; nil for a record of another
--   order (read it whole).
-- split_record(raw): a stored record as its fields (the record without its body; with
--   body parts, the whole value) and its body; the body is nil for the JSON layout (it is in the body HASH), and a value that
--   does not start with a MessagePack map or array is returned whole, its body nil.
-- fresh_record(fields, raw): a record of `fields` (a table without `b`) that keeps the
--   body of `raw`, a record that could not be used: compact when `raw` is a compact
--   record whose fields unpack (whatever they hold), else JSON (a JSON-layout body stays
--   in the body HASH; the body of a value that does not unpack is lost with it).
-- A record's first byte tells the layout: '{' is JSON; a compact record starts with a
-- MessagePack map header (0x80..0x8f, 0xde, 0xdf).
-- Body parts: a compact record whose body has the text of a task's body,
--   {"task":<T>,"args":<A>,"kwargs":<K>}, keeps the three texts as fields T, A and K (K
--   left out when it is {}) and nothing after the map: the fixed text around them is not
--   stored. The split is by text alone (the first ,"args": and the last ,"kwargs":), so
--   putting the texts back between the fixed ones gives the body byte for byte, whatever
--   it holds. Bodies over BODY_PARTS_MAX bytes are kept whole (the saving is a few bytes).

local BODY_TASK, BODY_ARGS, BODY_KWARGS = '{"task":', ',"args":', ',"kwargs":'
local BODY_PARTS_MAX = 512

-- body_parts(body): T, A and K of a body of a task's shape, or nil
local function body_parts(body)
  local n = #body
  if n > BODY_PARTS_MAX or string.sub(body, 1, 8) ~= BODY_TASK or string.byte(body, n) ~= 125 then
    return nil
  end
  local a = string.find(body, BODY_ARGS, 9, true)
  if not a then
    return nil
  end
  local k, from = nil, a + 8
  while true do -- the last one (at most n / 10 finds)
    local f = string.find(body, BODY_KWARGS, from, true)
    if not f then
      break
    end
    k, from = f, f + 1
  end
  if not k then
    return nil
  end
  return string.sub(body, 9, a - 1), string.sub(body, a + 8, k - 1), string.sub(body, k + 10, n - 1)
end

-- parts_body(meta, no_body): the body a record's parts make, or nil when it has none
-- (false when they are not texts); with no_body, true instead of the body (not made)
local function parts_body(meta, no_body)
  local t, a, k = meta.T, meta.A, meta.K
  if t == nil and a == nil then
    return nil
  end
  if type(t) ~= 'string' or type(a) ~= 'string' or (k ~= nil and type(k) ~= 'string') then
    return false
  end
  if no_body then
    return true
  end
  return BODY_TASK .. t .. BODY_ARGS .. a .. BODY_KWARGS .. (k or '{}') .. '}'
end

-- PARTS: the field of a parsed record's table that holds the parts its body was made
-- of, {body, T, A, K}, so that encode_record does not split that body again (never
-- stored: encode_record takes it out; parse_record sets or clears it)
local PARTS = '__parts'

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
  local parts = parts_body(meta, no_body)
  if parts == false then
    return nil, 'meta has a body part that is not a text'
  end
  local t, a, k = meta.T, meta.A, meta.K
  if parts then -- (a field set to nil when absent would add a slot to the table)
    meta.T, meta.A = nil, nil
    if k ~= nil then
      meta.K = nil
    end
  elseif t ~= nil or a ~= nil or k ~= nil then -- (one part alone: no body parts)
    meta.T, meta.A, meta.K = nil, nil, nil
  end
  if meta[PARTS] ~= nil then -- (setting an absent field to nil would add a slot to the table)
    meta[PARTS] = nil
  end
  if no_body then
    if meta.b ~= nil then
      meta.b = nil
    end
  elseif parts then
    meta.b = parts
    meta[PARTS] = {parts, t, a, k}
  elseif rest == -1 then
    meta.b = ''
  else
    meta.b = string.sub(raw, rest + 1)
  end
  return meta, nil
end

local function encode_record(meta)
  local had = meta[PARTS]
  if had ~= nil then
    meta[PARTS] = nil
  end
  local body = meta.b
  if body == nil then
    local text = cjson.encode(meta)
    return text, text
  end
  meta.b = nil
  local t, a, k
  if type(had) == 'table' and had[1] == body then -- the parts it was read with: the same body
    t, a, k = had[2], had[3], had[4] or '{}'
  else
    t, a, k = body_parts(body)
  end
  if t then
    meta.T, meta.A = t, a
    if k ~= '{}' then
      meta.K = k
    end
    local stored = cmsgpack.pack(meta)
    meta.T, meta.A, meta.b = nil, nil, body
    if k ~= '{}' then -- (set to nil when absent, it would add a slot to the table)
      meta.K = nil
    end
    if had ~= nil then
      meta[PARTS] = had
    end
    return stored, stored
  end
  local head = cmsgpack.pack(meta)
  meta.b = body
  if had ~= nil then
    meta[PARTS] = had
  end
  return head .. body, head
end

local LEASED_FIRST = {'u', 'k', 'n', 'd'}
local LEASED_FIRST_KEY = {['\161u'] = true, ['\161k'] = true, ['\161n'] = true, ['\161d'] = true}
-- the map16 header of n entries, n = 1..15 (literals: a library's code cannot call
-- `string` while it loads)
local MAP16 = {'\222\0\1', '\222\0\2', '\222\0\3', '\222\0\4', '\222\0\5', '\222\0\6', '\222\0\7', '\222\0\8',
  '\222\0\9', '\222\0\10', '\222\0\11', '\222\0\12', '\222\0\13', '\222\0\14', '\222\0\15'}

local function encode_leased(meta)
  local t = meta.t
  if t == nil or meta.b == nil then -- no token, or the JSON layout
    return encode_record(meta)
  end
  local first, count, moved = cmsgpack.pack('t', t), 1, nil
  if meta.u ~= nil or meta.k ~= nil or meta.n ~= nil or meta.d ~= nil then
    moved = {}
    for _, name in ipairs(LEASED_FIRST) do
      local v = meta[name]
      if v ~= nil then
        first = first .. cmsgpack.pack(name, v)
        count = count + 1
        moved[name] = v
        meta[name] = nil
      end
    end
  end
  meta.t = nil
  local rest = encode_record(meta)
  meta.t = t
  if moved then
    for name, v in pairs(moved) do
      meta[name] = v
    end
  end
  local head = string.byte(rest, 1)
  if head == 0x90 then -- no other field: cmsgpack packs an empty table as an empty array
    head = 0x80
  end
  local total = count + head - 0x80
  if head < 0x80 or head > 0x8f or total > 15 then -- more fields: encode_record's order
    return encode_record(meta)
  end
  return MAP16[total] .. first .. string.sub(rest, 2)
end

local function lease_value(raw, meta, t, a, q, call)
  local h = raw and string.byte(raw, 1)
  if h and h >= 0x80 and h <= 0x8a and meta.t == nil and meta.a == nil and meta.c == nil
      and meta.st == nil and meta.q == nil and meta.u == nil and meta.k == nil
      and meta.n == nil and meta.d == nil and not string.find(raw, '\192', 2, true) then
    local shared = call.packed
    if shared == nil then
      shared = cmsgpack.pack('c', call.c, 'st', call.st)
      call.packed = shared
    end
    return MAP16[h - 0x80 + 5] .. cmsgpack.pack('t', t, 'a', a, 'q', q) .. shared
      .. string.sub(raw, 2)
  end
  meta.t, meta.a, meta.c, meta.st, meta.q = t, a, call.c, call.st, q
  return encode_leased(meta)
end

local function leased_token(raw, tok)
  local h1, h2, n = string.byte(raw, 1, 3)
  if h1 ~= 0xde or h2 ~= 0 or not n or n > 15 or string.sub(raw, 4, 5) ~= '\161t' then
    return nil
  end
  local packed = cmsgpack.pack(tok)
  local after = 6 + #packed
  if string.sub(raw, 6, after - 1) ~= packed then
    return false, false
  end
  return true, LEASED_FIRST_KEY[string.sub(raw, after, after + 1)] == true
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
  local parts = parts_body(head)
  if parts then
    return raw, parts
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
      fields.b = body
      local stored = encode_record(fields)
      fields.b = nil
      return stored
    end
  end
  return cjson.encode(fields)
end
