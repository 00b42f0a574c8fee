-- _attempts.lua: the errors of a job's attempts, one entry each, in the `errors` HASH.
-- The value is 'zqa1:' followed by a JSON array, oldest first, of at most ATTEMPTS_KEPT
-- entries {"n": attempt, "t": ms on Redis TIME, "c": consumer, "e": text} ("n" and "c"
-- absent when not known). A value without the prefix (written by an older version, or by
-- hand) is one attempt whose number and time are not known: it is kept as the first
-- entry. Each text is cut to ATTEMPT_HEAD bytes of its start and ATTEMPT_TAIL of its end
-- around a marker '\n[… N bytes cut …]\n', on UTF-8 character boundaries.
-- add_attempts(errors, now, entries): append to each job's list; entries is a list of
--   {id, text, attempt or nil, consumer or nil}. One HMGET and one HSET (soft, as every
--   write of an error) for the whole list. Work: O(#entries * ATTEMPTS_KEPT).
--@include count

local ATTEMPTS_KEPT = 10
local ATTEMPT_HEAD = 1024
local ATTEMPT_TAIL = 3072
local ATTEMPTS_PREFIX = 'zqa1:'

local function is_cont(s, i) -- byte i of s is a UTF-8 continuation byte
  local b = string.byte(s, i)
  return b ~= nil and b >= 128 and b < 192
end

local function cut_text(text)
  local n = #text
  if n <= ATTEMPT_HEAD + ATTEMPT_TAIL then
    return text
  end
  local head = ATTEMPT_HEAD
  while head > 0 and is_cont(text, head + 1) do
    head = head - 1
  end
  local tail = n - ATTEMPT_TAIL + 1
  while tail <= n and is_cont(text, tail) do
    tail = tail + 1
  end
  return string.sub(text, 1, head) .. '\n[… ' .. (tail - head - 1) .. ' bytes cut …]\n' ..
    string.sub(text, tail)
end

local function attempts_of(raw)
  if not raw then
    return {}
  end
  if string.sub(raw, 1, #ATTEMPTS_PREFIX) == ATTEMPTS_PREFIX then
    local ok, list = pcall(cjson.decode, string.sub(raw, #ATTEMPTS_PREFIX + 1))
    if ok and type(list) == 'table' then
      return list
    end
  end
  return {{e = cut_text(raw)}}
end

local function add_attempts(errors, now, entries)
  if #entries == 0 then
    return
  end
  local ids = {}
  for i, e in ipairs(entries) do
    ids[i] = e[1]
  end
  local ok, raws = pcall(redis.call, 'HMGET', errors, unpack(ids))
  if not ok then -- not a hash: the write below is skipped as well (soft)
    raws = {}
  end
  local lists, order, out = {}, {}, {}
  for i, e in ipairs(entries) do
    local id = e[1]
    local list = lists[id]
    if not list then
      list = attempts_of(raws[i] or nil)
      lists[id] = list
      order[#order + 1] = id
    end
    list[#list + 1] = {n = e[3], t = now, c = e[4], e = cut_text(tostring(e[2]))}
    while #list > ATTEMPTS_KEPT do
      table.remove(list, 1)
    end
  end
  for _, id in ipairs(order) do
    out[#out + 1] = id
    out[#out + 1] = ATTEMPTS_PREFIX .. cjson.encode(lists[id])
  end
  soft('HSET', errors, unpack(out))
end
