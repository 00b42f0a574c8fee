-- info.lua (read-only): a consistent snapshot of one job.
--
-- KEYS[1] ready ZSET  KEYS[2] delayed ZSET  KEYS[3] leased ZSET  KEYS[4] dead ZSET
-- KEYS[5] meta  HASH (records, _record.lua)  KEYS[6] errors  HASH  KEYS[7] progress HASH
-- KEYS[8] body  HASH (bodies of JSON-layout records)
-- KEYS[9] wait  ZSET  KEYS[10] expired ZSET
-- KEYS[11] finished ZSET  KEYS[12] cancels ZSET  KEYS[13] history HASH (the history of
--   finished jobs, _history.lua)  KEYS[14] result STRING (this job's kept result)
-- ARGV[1] id   ARGV[2] with_body (1 = include the body)
-- Returns: {} when no such job; else {state, state_score, rank, meta, error, progress, body,
--   result}
--   (meta: the record without its body, MessagePack or JSON)
--   state: ready | delayed | leased | dead | waiting (for its parents) | expired | orphan
--   (a record in no set: never expected) | succeeded | cancelled (a job that is in none of
--   those and has no record, but an entry in the history of finished jobs: `meta` is
--   then the map of its end followed by its record's fields, _history.lua);
--   state_score: ready score, run-at, lease deadline, time of death, since when waiting,
--   when it expired, or when it succeeded or was cancelled;
--   rank: ZRANK in ready, -1 in any other state; error: the `errors` HASH's value (the
--   attempts' errors, _attempts.lua), or for a succeeded or cancelled job the `er` field
--   of its kept record's head (the value as it was when it ended; a value that is not
--   text is ignored); result: the kept result of a job that succeeded (its result key),
--   else ''; missing values are ''.
-- Work: O(log N).

--@include record

local id = ARGV[1]
local names = {'ready', 'delayed', 'leased', 'dead', 'waiting', 'expired'}
local k = {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[9], KEYS[10]}
local state, score = nil, ''
for i = 1, 6 do
  local s = redis.call('ZSCORE', k[i], id)
  if s then
    state, score = names[i], s
    break
  end
end
local meta = redis.call('HGET', KEYS[5], id)
local ended = false -- its record is the history's (no error, progress or body HASH)
if not state then
  if meta then
    state = 'orphan'
  elseif KEYS[13] then
    local s = redis.call('ZSCORE', KEYS[11], id)
    if s then
      state = 'succeeded'
    else
      s = redis.call('ZSCORE', KEYS[12], id)
      state = s and 'cancelled' or nil
    end
    if state then
      meta = redis.call('HGET', KEYS[13], id)
      score, ended = s, true
      if not meta then -- an index entry without its record: never expected
        state = nil
      end
    end
  end
  if not state then
    return {}
  end
end
local rank = -1
if state == 'ready' then
  rank = redis.call('ZRANK', KEYS[1], id)
end
local body = nil
local kept_errors = '' -- an ended job: the errors kept in the head of its record
if ended then -- a map of its end, then its record (compact): both maps are returned
  local ok, rest, head = pcall(cmsgpack.unpack_one, meta)
  if ok and type(head) == 'table' and type(head.er) == 'string' then
    kept_errors = head.er
  end
  if not ok or rest == -1 then
    meta, body = meta, ''
  else
    local head
    head, body = split_record(string.sub(meta, rest + 1))
    meta = string.sub(meta, 1, rest) .. head
  end
elseif meta then
  meta, body = split_record(meta)
end
if ARGV[2] ~= '1' then
  body = ''
elseif body == nil then -- the JSON layout: its body in the body HASH
  body = ended and '' or redis.call('HGET', KEYS[8], id) or ''
end
if ended then
  local result = ''
  if state == 'succeeded' and KEYS[14] then
    result = redis.call('GET', KEYS[14]) or ''
  end
  return {state, score, rank, meta, kept_errors, '', body, result}
end
return {state, score, rank, meta or '', redis.call('HGET', KEYS[6], id) or '',
  redis.call('HGET', KEYS[7], id) or '', body, ''}
