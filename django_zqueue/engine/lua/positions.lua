-- positions.lua (read-only): where each of several jobs stands, read atomically.
--
-- KEYS by role (_keys.lua, engine/keys.py SCRIPT_ROLES): ready ZSET, delayed ZSET,
--   leased ZSET, dead ZSET, wait ZSET (workflow jobs waiting for their parents),
--   expired ZSET
-- ARGV[1] .. ARGV[n] ids (1 <= n <= 500: Shard.positions checks it)
-- Returns: 2n values, two per id in order: its ZRANK in ready and its ready score (a
--   string), or a code and '': -1 delayed, -2 leased, -3 dead, -4 in no set, -5 waiting
--   for its parents, -6 expired. ZQ_BAD_ARGUMENT when a key is not its role's.
-- Work: O(n log N), n <= 500.
--@include keys

local K = key_roles(KEYS, {'ready', 'delayed', 'leased', 'dead', 'wait', 'expired'})
local others = {{K.delayed, -1}, {K.leased, -2}, {K.dead, -3}, {K.wait, -5}, {K.expired, -6}}
local out = {}
for _, id in ipairs(ARGV) do
  local score = redis.call('ZSCORE', K.ready, id)
  if score then
    out[#out + 1] = redis.call('ZRANK', K.ready, id)
    out[#out + 1] = score
  else
    local code = -4
    for _, s in ipairs(others) do
      local key, other = s[1], s[2]
      if redis.call('ZSCORE', key, id) then
        code = other
        break
      end
    end
    out[#out + 1] = code
    out[#out + 1] = ''
  end
end
return out
