-- wf_link.lua: make a job that already exists a parent of a new dependent (depends_on
-- given by tag): the dependent is added to its links, so its end is sent on.
--
-- KEYS[1] ready ZSET  KEYS[2] delayed ZSET  KEYS[3] leased ZSET  KEYS[4] dead ZSET
-- KEYS[5] wait  ZSET  KEYS[6] meta    HASH  KEYS[7] wf HASH (the parent's links)
-- ARGV[1] parent id   ARGV[2] the dependent, JSON [queue, tag, index]
-- ARGV[3] most dependents a job may have
-- Raises ZQ_BAD_ARGUMENT (nothing written) for a dependent that is not a JSON list, or
--   beyond the most dependents.
-- Returns: 'linked' (the parent is waiting, ready, delayed or in flight: its end will be
--   sent on); 'dead' (linked as well; the parent is dead now: the caller sends its failure
--   on, and a requeue that succeeds later revives the dependent); '' no such job
--   (finished, deleted or never published); 'corrupt' its record cannot be used (nothing
--   written: the caller treats it as failed).
-- Work: O(log N + dependents of the parent).

--@include decode_meta
--@include guard
--@include record

guard_keys(KEYS)

local id, kid, most = ARGV[1], ARGV[2], tonumber(ARGV[3])
local ok, ref = pcall(cjson.decode, kid)
if not ok or type(ref) ~= 'table' or #ref ~= 3 then
  error('ZQ_BAD_ARGUMENT: the dependent must be a JSON list [queue, tag, index]')
end
local state = nil
for i, name in ipairs({'ready', 'delayed', 'leased', 'dead', 'waiting'}) do
  if redis.call('ZSCORE', KEYS[i], id) then
    state = name
    break
  end
end
if not state then
  return ''
end
local meta = decode_meta(redis.call('HGET', KEYS[6], id))
if not meta then
  return 'corrupt'
end
local kids = {}
-- a job without `k` has no dependents yet: links under its tag are an earlier job's
-- (purged or trimmed while its links lived on), not to be sent this job's end
local raw = meta.k and redis.call('HGET', KEYS[7], 'kids')
if raw then
  local decoded, list = pcall(cjson.decode, raw)
  if decoded and type(list) == 'table' then
    kids = list
  end
end
if #kids >= most then
  error('ZQ_BAD_ARGUMENT: job ' .. id .. ' has ' .. #kids .. ' dependents already, the most a job may have')
end
kids[#kids + 1] = ref
redis.call('HSET', KEYS[7], 'kids', cjson.encode(kids))
redis.call('PERSIST', KEYS[7])
if not meta.k then
  meta.k = 1
  redis.call('HSET', KEYS[6], id, (encode_record(meta)))
end
if state == 'dead' then
  return 'dead'
end
return 'linked'
