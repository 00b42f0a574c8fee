-- positions.lua (read-only): where each of several jobs stands, read atomically.
--
-- KEYS[1] ready ZSET  KEYS[2] delayed ZSET  KEYS[3] leased ZSET  KEYS[4] dead ZSET
-- KEYS[5] wait ZSET (workflow jobs waiting for their parents)  KEYS[6] expired ZSET
-- ARGV[1] .. ARGV[n] ids (1 <= n <= 500: Shard.positions checks it)
-- Returns: 2n values, two per id in order: its ZRANK in ready and its ready score (a
--   string), or a code and '': -1 delayed, -2 leased, -3 dead, -4 in no set, -5 waiting
--   for its parents, -6 expired.
-- Work: O(n log N), n <= 500.

local out = {}
for _, id in ipairs(ARGV) do
  local score = redis.call('ZSCORE', KEYS[1], id)
  if score then
    out[#out + 1] = redis.call('ZRANK', KEYS[1], id)
    out[#out + 1] = score
  else
    local code = -4
    for i = 2, 4 do
      if redis.call('ZSCORE', KEYS[i], id) then
        code = 1 - i
        break
      end
    end
    if code == -4 and redis.call('ZSCORE', KEYS[5], id) then
      code = -5
    elseif code == -4 and redis.call('ZSCORE', KEYS[6], id) then
      code = -6
    end
    out[#out + 1] = code
    out[#out + 1] = ''
  end
end
return out
