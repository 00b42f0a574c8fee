-- _after.lua: where a walk of a sorted set resumes after a cursor (score, member), in the
-- set's order (score, then member bytes), the member need not be in the set any more: an
-- entry removed or added since the cursor was taken shifts nothing the walk depends on.
-- rank_after(key, score, member): the rank of the first entry strictly after (score,
--   member); `score` is the score as its decimal text, as ZCOUNT takes it.
--   O(log N * log E), E the entries of that score (a binary search among them).

-- a < b as Redis orders the members of equal score: bytes, then length
local function member_before(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end

local function rank_after(key, score, member)
  local lo = redis.call('ZCOUNT', key, '-inf', '(' .. score) -- first of score >= score
  local hi = redis.call('ZCOUNT', key, '-inf', score) -- past the last of that score
  while lo < hi do -- the first of that score whose member is after `member`
    local mid = math.floor((lo + hi) / 2)
    local m = redis.call('ZRANGE', key, mid, mid)[1]
    if m == nil or not member_before(member, m) then
      lo = mid + 1
    else
      hi = mid
    end
  end
  return lo
end
