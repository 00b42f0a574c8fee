-- state.lua (read-only): which set holds a job, read atomically.
--
-- KEYS by role (_keys.lua, engine/keys.py SCRIPT_ROLES): ready ZSET, delayed ZSET,
--   leased ZSET, dead ZSET, wait ZSET, expired ZSET
-- ARGV[1] id
-- Returns: 'ready' | 'delayed' | 'leased' | 'dead' | 'waiting' (for its parents) |
--   'expired' (not started by its expiry), or '' when no set holds it.
--   ZQ_BAD_ARGUMENT when a key is not its role's.
-- Work: O(1) per set.
--@include keys

local K = key_roles(KEYS, {'ready', 'delayed', 'leased', 'dead', 'wait', 'expired'})
local sets = {{K.ready, 'ready'}, {K.delayed, 'delayed'}, {K.leased, 'leased'},
  {K.dead, 'dead'}, {K.wait, 'waiting'}, {K.expired, 'expired'}}
for _, s in ipairs(sets) do
  local key, name = s[1], s[2]
  if redis.call('ZSCORE', key, ARGV[1]) then
    return name
  end
end
return ''
