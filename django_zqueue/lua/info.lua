-- info.lua (read-only): a consistent snapshot of one job.
--
-- KEYS[1] ready ZSET  KEYS[2] delayed ZSET  KEYS[3] leased ZSET  KEYS[4] dead ZSET
-- KEYS[5] meta  HASH (records, _record.lua)  KEYS[6] errors  HASH  KEYS[7] progress HASH
-- KEYS[8] body  HASH (bodies of JSON-layout records)
-- KEYS[9] wait  ZSET  KEYS[10] expired ZSET
-- ARGV[1] id   ARGV[2] with_body (1 = include the body)
-- Returns: {} when no such job; else {state, state_score, rank, meta, error, progress, body}
--   (meta: the record without its body, MessagePack or JSON)
--   state: ready | delayed | leased | dead | waiting (for its parents) | expired | orphan
--   (a record in no set: never expected);
--   state_score: ready score, run-at, lease deadline, time of death, since when waiting,
--   or when it expired;
--   rank: ZRANK in ready, -1 in any other state; missing values are ''.
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
if not state then
  if not meta then
    return {}
  end
  state = 'orphan'
end
local rank = -1
if state == 'ready' then
  rank = redis.call('ZRANK', KEYS[1], id)
end
local body = nil
if meta then
  meta, body = split_record(meta)
end
if ARGV[2] ~= '1' then
  body = ''
elseif body == nil then -- the JSON layout: its body in the body HASH
  body = redis.call('HGET', KEYS[8], id) or ''
end
return {state, score, rank, meta or '', redis.call('HGET', KEYS[6], id) or '',
  redis.call('HGET', KEYS[7], id) or '', body}
