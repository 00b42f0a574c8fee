-- state.lua (read-only): which set holds a job, read atomically.
--
-- KEYS[1] ready ZSET  KEYS[2] delayed ZSET  KEYS[3] leased ZSET  KEYS[4] dead ZSET
-- KEYS[5] wait ZSET  KEYS[6] expired ZSET
-- ARGV[1] id
-- Returns: 'ready' | 'delayed' | 'leased' | 'dead' | 'waiting' (for its parents) |
--   'expired' (not started by its expiry), or '' when no set holds it.
-- Work: O(1) per set.

local names = {'ready', 'delayed', 'leased', 'dead', 'waiting', 'expired'}
for i = 1, 6 do
  if redis.call('ZSCORE', KEYS[i], ARGV[1]) then
    return names[i]
  end
end
return ''
