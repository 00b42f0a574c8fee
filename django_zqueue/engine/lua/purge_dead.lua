-- purge_dead.lua: delete up to `limit` dead letters (oldest first) with their records.
--
-- KEYS[1] dead ZSET  KEYS[2] body HASH  KEYS[3] meta HASH  KEYS[4] errors HASH
-- KEYS[5] progress HASH
-- ARGV[1] limit (1..5000)
-- Returns: how many were deleted (less than `limit` means none are left).
-- Work: O(limit log N).

--@include drop_record
--@include guard

guard_keys(KEYS)

local ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  drop_record(KEYS[2], KEYS[3], KEYS[4], KEYS[5], id)
end
return #ids
