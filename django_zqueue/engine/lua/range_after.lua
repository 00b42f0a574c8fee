-- range_after.lua (read-only): the next entries of a sorted set after a cursor, in the
-- set's order (score, then member bytes), up to a highest score. How a bulk action walks
-- the jobs of a state in chunks while workers change the set: an entry removed or added
-- since the last chunk shifts no rank the walk depends on.
--
-- KEYS[1] set ZSET (a state's: ready, delayed, leased, dead, wait)
-- ARGV[1] after_score ('' = from the start)   ARGV[2] after_member (the cursor's member,
--   with after_score; it need not be in the set any more)
-- ARGV[3] top (highest score returned: the walk's end, read when it began; '+inf' = none)
-- ARGV[4] limit (1..1000)
-- Raises ZQ_BAD_ARGUMENT for a score that is not a number, or a limit out of bounds.
-- Returns: {member1, score1, member2, score2, ...}: at most `limit` entries strictly after
--   (after_score, after_member), of score <= top, in order; fewer than `limit`: the end.
-- Work: O(log N * log E + limit log N), E the entries of score after_score (a binary
--   search among them, byte order as Redis keeps them: _after.lua).

--@include after
--@include bounds

local limit = tonumber(ARGV[4])
local after, top = nil, tonumber(ARGV[3])
if ARGV[1] ~= '' then
  after = tonumber(ARGV[1])
end
if not is_int(limit, 1, MAX_PAGE) or not top
  or top ~= top or (ARGV[1] ~= '' and (not after or after ~= after)) then
  error('ZQ_BAD_ARGUMENT: range_after needs scores and a limit in [1, ' .. MAX_PAGE .. ']')
end

local key, start = KEYS[1], 0
if after then
  start = rank_after(key, ARGV[1], ARGV[2])
end
local got = redis.call('ZRANGE', key, start, start + limit - 1, 'WITHSCORES')
local out = {}
for i = 1, #got, 2 do
  if tonumber(got[i + 1]) > top then
    break
  end
  out[#out + 1] = got[i]
  out[#out + 1] = got[i + 1]
end
return out
