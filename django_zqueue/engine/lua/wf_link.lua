-- wf_link.lua: make a job that already exists a parent of a new dependent (depends_on
-- given by tag): the dependent is added to its links, so its end is sent on.
--
-- KEYS by role (_keys.lua, engine/keys.py SCRIPT_ROLES; ZQ_BAD_ARGUMENT, nothing
--   written, when a key is not its role's), in this order:
-- ready ZSET  delayed ZSET  leased ZSET  dead ZSET
-- wait  ZSET  meta    HASH  KEYS[7] wf HASH (the parent's links)
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
--@include keys

local k = key_roles(KEYS, {'ready', 'delayed', 'leased', 'dead', 'wait', 'meta'})

guard_keys(KEYS)

local id, kid, most = ARGV[1], ARGV[2], tonumber(ARGV[3])
local ok, ref = pcall(cjson.decode, kid)
if not ok or type(ref) ~= 'table' or #ref ~= 3 then
  error('ZQ_BAD_ARGUMENT: the dependent must be a JSON list [queue, tag, index]')
end
local state = nil
for _, s in ipairs({{k.ready, 'ready'}, {k.delayed, 'delayed'}, {k.leased, 'leased'},
  {k.dead, 'dead'}, {k.wait, 'waiting'}}) do
  local key, name = s[1], s[2]
  if redis.call('ZSCORE', key, id) then
    state = name
    break
  end
end
if not state then
  return ''
end
local meta = decode_meta(redis.call('HGET', k.meta, id))
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
  redis.call('HSET', k.meta, id, (encode_record(meta)))
end
if state == 'dead' then
  return 'dead'
end
return 'linked'
