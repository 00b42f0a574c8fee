-- search.lua (read-only): one bounded step of a search of one state's jobs for a text:
-- walks the state's sorted set in its order (score, then member bytes) from a cursor and
-- returns the jobs whose body (its JSON arguments, the task name among them), or tag,
-- holds the text as a plain substring (bytes, case-sensitive; no Lua pattern).
--
-- KEYS[1] set ZSET (a state's: ready, delayed, leased, dead, wait)
-- KEYS[2] meta HASH (records: a compact record holds its body, lua/_record.lua)
-- KEYS[3] body HASH (the bodies of JSON-layout records, read for those only)
-- ARGV[1] text (1..1000 bytes)
-- ARGV[2] after_score ('' = from the start)   ARGV[3] after_member (the cursor's member,
--   with after_score; it need not be in the set any more: _after.lua)
-- ARGV[4] steps (entries looked at, at most; 1..1000)   ARGV[5] limit (matches, 1..1000)
-- Raises ZQ_BAD_ARGUMENT for an argument out of bounds (it writes nothing anyway).
-- Returns: {looked, more, rank0, last_score, last_member, tag1, score1, off1, tag2, ...}:
--   looked: entries looked at; more = 1 when the set may hold more after the cursor;
--   (last_score, last_member): the last entry looked at (the next call's cursor; '' when
--   none); rank0: the rank of the first entry looked at; the matches in order, each
--   with its score and offset (its rank is rank0 + offset, at this call). The walk stops
--   at `limit` matches (the cursor is then the last match) or `steps` entries.
--   An entry whose record is gone is skipped; a record that is not one is matched by
--   its tag only.
-- Work: O(log N * log E + steps * (log N + size of a record)), in at most four commands.

--@include after
--@include bounds
--@include record

local text, steps, limit = ARGV[1], tonumber(ARGV[4]), tonumber(ARGV[5])
local after = nil
if ARGV[2] ~= '' then
  after = tonumber(ARGV[2])
end
if #text < 1 or #text > MAX_NEEDLE_BYTES or not is_int(steps, 1, MAX_PAGE)
  or not is_int(limit, 1, MAX_PAGE) or (ARGV[2] ~= '' and (not after or after ~= after)) then
  error('ZQ_BAD_ARGUMENT: search needs a text of 1..' .. MAX_NEEDLE_BYTES
    .. ' bytes, steps and limit in [1, ' .. MAX_PAGE .. '], a numeric cursor')
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
  local raw = raws[i]
  if type(raw) == 'string' and raw ~= '' then
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
  if b and (string.find(ids[i], text, 1, true) or string.find(b, text, 1, true)) then
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
