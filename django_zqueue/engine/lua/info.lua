-- info.lua (read-only): a consistent snapshot of one job.
--
-- KEYS by role (_keys.lua, engine/keys.py SCRIPT_ROLES; ZQ_BAD_ARGUMENT, nothing
--   written, when a key is not its role's), in this order:
-- ready ZSET  delayed ZSET  leased ZSET  dead ZSET
-- meta  HASH (records, _record.lua)  errors  HASH  progress HASH
-- body  HASH (bodies of JSON-layout records)
-- wait  ZSET  expired ZSET
-- finished ZSET  cancels ZSET  history HASH (the history of
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
--@include keys

local k = key_roles(KEYS, {'ready', 'delayed', 'leased', 'dead', 'meta', 'errors', 'progress',
  'body', 'wait', 'expired', 'finished', 'cancels', 'history'})

local id = ARGV[1]
local names = {'ready', 'delayed', 'leased', 'dead', 'waiting', 'expired'}
local sets = {k.ready, k.delayed, k.leased, k.dead, k.wait, k.expired}
local state, score = nil, ''
for i, key in ipairs(sets) do
  local s = redis.call('ZSCORE', key, id)
  if s then
    state, score = names[i], s
    break
  end
end
local meta = redis.call('HGET', k.meta, id)
local ended = false -- its record is the history's (no error, progress or body HASH)
if not state then
  if meta then
    state = 'orphan'
  elseif k.history then
    local s = redis.call('ZSCORE', k.finished, id)
    if s then
      state = 'succeeded'
    else
      s = redis.call('ZSCORE', k.cancels, id)
      state = s and 'cancelled' or nil
    end
    if state then
      meta = redis.call('HGET', k.history, id)
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
  rank = redis.call('ZRANK', k.ready, id)
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
  body = ended and '' or redis.call('HGET', k.body, id) or ''
end
if ended then
  local result = ''
  if state == 'succeeded' and KEYS[14] then
    result = redis.call('GET', KEYS[14]) or ''
  end
  return {state, score, rank, meta, kept_errors, '', body, result}
end
return {state, score, rank, meta or '', redis.call('HGET', k.errors, id) or '',
  redis.call('HGET', k.progress, id) or '', body, ''}
