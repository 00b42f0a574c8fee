-- group_check.lua: check, writing nothing, that the jobs of each group fit in the queue's
-- group_max_length (the check before a publish that spans several script calls: each
-- call checks again, _group_room.lua).
--
-- KEYS[1] ready ZSET   KEYS[2] delayed ZSET   KEYS[3] meta HASH   KEYS[4] gjobs ZSET
-- ARGV[1] the queue's policy, read by name (_policy.lua): group_max_length
--   (1..MAX_GROUP_LENGTH, 1000)
-- ARGV[1 + i] group i, i = 1..m, m >= 1: a MessagePack map read by name (_entry.lua):
--   `group` (a job's group key; '' for jobs without one) and `jobs` (its jobs that would
--   enter ready or delayed, 1..MAX_GROUP_ADDS, 10^6)
-- Raises ZQ_BAD_ARGUMENT for arguments out of bounds (a policy that is not one too);
--   ZQ_QUEUE_FULL naming the first
--   group whose jobs do not fit.
-- Returns: 0 (every group has room); read-only.
-- Work: one ZLEXCOUNT per group; for a group past its limit, up to its limit + 1000
--   index entries read (4000 in all).

--@include bounds
--@include group_room
--@include guard
--@include entry
--@include policy

local k = {ready = KEYS[1], delayed = KEYS[2], meta = KEYS[3], gjobs = KEYS[4]}
guard_keys({k.gjobs})
local limit = read_policy(ARGV[1]).group_max_length
if not is_int(limit, 1, MAX_GROUP_LENGTH) or #ARGV < 2 then
  error('ZQ_BAD_ARGUMENT: group_check needs group_max_length 1..' .. MAX_GROUP_LENGTH
    .. ' and (group, jobs) entries')
end
local order, adds = {}, {}
for i = 2, #ARGV do
  local e = entry(ARGV[i])
  local g, n = e and e.group, e and e.jobs
  if type(g) ~= 'string' or adds[g] or not is_int(n, 1, MAX_GROUP_ADDS)
      or string.find(g, '\0', 1, true) then
    error('ZQ_BAD_ARGUMENT: group_check takes each group once, without NUL, with 1..10^6 jobs')
  end
  order[#order + 1] = g
  adds[g] = n
end
check_group_room(k, limit, order, adds)
return 0
