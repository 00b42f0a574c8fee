-- search.lua (read-only): one bounded step of a search of one state's jobs for a text:
-- walks the state's sorted set in its order (score, then member bytes) from a cursor and
-- returns the jobs whose body (its JSON arguments, the task name among them), or tag,
-- holds the text: a plain substring (bytes, case-sensitive), or with kind 'p' a Lua
-- pattern (read/search.py builds one that lets JSON's spacing vary); or whose body, a
-- JSON object, has at a field path (`user_id`, `args.0`, `kwargs.user.id`: looked up in
-- the body, then in its `kwargs`; a number segment indexes a list from 0) a scalar equal
-- to a value (a number numerically, a string, true/false/null by their JSON text).
--
-- KEYS[1] set ZSET (a state's: ready, delayed, leased, dead, wait; or an ended state's:
--   finished, cancels, expired)
-- KEYS[2] meta HASH (records: a compact record holds its body, lua/_record.lua), or the
--   history HASH (kept records, _history.lua: a map of how the job ended, then the record)
-- KEYS[3] body HASH (the bodies of JSON-layout records, read for those only)
-- ARGV[1] text (1..1000 bytes; a pattern: 1..8000)
-- ARGV[2] after_score ('' = from the start)   ARGV[3] after_member (the cursor's member,
--   with after_score; it need not be in the set any more: _after.lua)
-- ARGV[4] steps (entries looked at, at most; 1..1000)   ARGV[5] limit (matches, 1..1000)
-- ARGV[6] kind ('' or absent: plain text; 'p': a Lua pattern)
-- ARGV[7] field path ('' or absent: none; at most 200 bytes, 16 segments)
-- ARGV[8] field value (with a path)   ARGV[9] kept ('1': KEYS[2] holds kept records)
-- Raises ZQ_BAD_ARGUMENT for an argument out of bounds or a pattern Lua cannot read (it
-- writes nothing anyway).
-- Returns: {looked, more, rank0, last_score, last_member, tag1, score1, off1, tag2, ...}:
--   looked: entries looked at; more = 1 when the set may hold more after the cursor;
--   (last_score, last_member): the last entry looked at (the next call's cursor; '' when
--   none); rank0: the rank of the first entry looked at; the matches in order, each
--   with its score and offset (its rank is rank0 + offset, at this call). The walk stops
--   at `limit` matches (the cursor is then the last match) or `steps` entries.
--   An entry whose record is gone is skipped; a record that is not one is matched by
--   its tag only.
-- Work: O(log N * log E + steps * (log N + size of a record)), in at most four commands
--   (a pattern: times its length; a field path: a JSON decode of each body).

--@include after
--@include bounds
--@include record

local text, steps, limit = ARGV[1], tonumber(ARGV[4]), tonumber(ARGV[5])
local kind, path, want, kept = ARGV[6] or '', ARGV[7] or '', ARGV[8] or '', ARGV[9] == '1'
local after = nil
if ARGV[2] ~= '' then
  after = tonumber(ARGV[2])
end
local most = MAX_NEEDLE_BYTES
if kind == 'p' then
  most = 8 * MAX_NEEDLE_BYTES
end
local segments = {}
for seg in string.gmatch(path, '[^.]+') do
  segments[#segments + 1] = seg
end
if #text < 1 or #text > most or not is_int(steps, 1, MAX_PAGE)
  or not is_int(limit, 1, MAX_PAGE) or (ARGV[2] ~= '' and (not after or after ~= after))
  or (kind ~= '' and kind ~= 'p') or (kind == 'p' and not pcall(string.find, '', text))
  or #path > MAX_FIELD_PATH_BYTES or #segments > MAX_FIELD_PATH_PARTS or (path ~= '' and #segments == 0)
  or (ARGV[9] and ARGV[9] ~= '' and ARGV[9] ~= '1' and ARGV[9] ~= '0') then
  error('ZQ_BAD_ARGUMENT: search needs a text of 1..' .. MAX_NEEDLE_BYTES
    .. ' bytes (a pattern Lua reads: 1..' .. 8 * MAX_NEEDLE_BYTES .. '), steps and limit'
    .. ' in [1, ' .. MAX_PAGE .. '], a numeric cursor, a field path of at most ' .. MAX_FIELD_PATH_PARTS
    .. ' segments')
end
local plain = kind ~= 'p'

-- the value at the field path of a decoded body (then of its kwargs); nil when none
local function at_path(node)
  for _, seg in ipairs(segments) do
    if type(node) ~= 'table' then
      return nil
    end
    local v = node[seg]
    local n = tonumber(seg)
    if v == nil and n and n >= 0 and n == math.floor(n) then
      v = node[n + 1]
    end
    node = v
  end
  return node
end

local function field_matches(b)
  local ok, doc = pcall(cjson.decode, b)
  if not ok or type(doc) ~= 'table' then
    return false
  end
  local v = at_path(doc)
  if v == nil and type(doc['kwargs']) == 'table' then
    v = at_path(doc['kwargs'])
  end
  local t = type(v)
  if t == 'string' then
    return v == want
  elseif t == 'number' then
    return tonumber(want) == v
  elseif t == 'boolean' then
    return tostring(v) == want
  end
  return v == cjson.null and want == 'null'
end

local set, meta, body = KEYS[1], KEYS[2], KEYS[3]
local start = 0
if after then
  start = rank_after(set, ARGV[2], ARGV[3])
end
local got = redis.call('ZRANGE', set, start, start + steps - 1, 'WITHSCORES')
local n = #got / 2
if n == 0 then
  return {0, 0, start, '', ''}
end
local ids = {}
for i = 1, n do
  ids[i] = got[2 * i - 1]
end
local raws = redis.call('HMGET', meta, unpack(ids))
local bodies, need, at = {}, {}, {}
for i = 1, n do
  local raw, whole = raws[i], true
  if kept and type(raw) == 'string' then
    local ok, rest = pcall(cmsgpack.unpack_one, raw)
    if ok and rest ~= -1 then
      raw = string.sub(raw, rest + 1)
    else
      whole = false -- a kept record without its record: matched by its tag only
    end
  end
  if not whole then
    bodies[i] = ''
  elseif type(raw) == 'string' and raw ~= '' then
    local _, b = split_record(raw)
    if b then
      bodies[i] = b
    elseif string.byte(raw, 1) == 123 then -- the JSON layout: its body is in the body HASH
      need[#need + 1] = ids[i]
      at[#at + 1] = i
    else
      bodies[i] = ''
    end
  else
    bodies[i] = false -- gone since the range was read
  end
end
if #need > 0 then
  local more = redis.call('HMGET', body, unpack(need))
  for j, i in ipairs(at) do
    bodies[i] = more[j] or ''
  end
end

local out = {0, 0, start, '', ''}
local found, looked = 0, 0
for i = 1, n do
  looked = i
  local b = bodies[i]
  if b and (string.find(ids[i], text, 1, plain) or string.find(b, text, 1, plain)
    or (path ~= '' and b ~= '' and field_matches(b))) then
    found = found + 1
    out[#out + 1] = ids[i]
    out[#out + 1] = got[2 * i]
    out[#out + 1] = i - 1
    if found == limit then
      break
    end
  end
end
out[1] = looked
out[4] = got[2 * looked]
out[5] = ids[looked]
if looked < n or n == steps then
  out[2] = 1
end
return out
