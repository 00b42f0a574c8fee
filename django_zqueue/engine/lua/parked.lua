-- parked.lua: what a delayed job is parked for (docs/durable.md), for its status: the
-- record's `pk` ("z:<name>" a durable sleep, "w:<name>" a wait for an event) and its
-- wake time. A read: nothing is written.
--
-- KEYS[1] delayed ZSET   KEYS[2] meta HASH
-- ARGV[1] id
-- Returns: {pk, wake_ms} while the job waits in delayed, parked; {} otherwise.
-- Work: O(log N).

--@include durable_job

local id = ARGV[1]
local wake = redis.call('ZSCORE', KEYS[1], id)
if not wake then
  return {}
end
local meta = job_meta(KEYS[2], id)
if not meta or type(meta.pk) ~= 'string' then
  return {}
end
return {meta.pk, wake}
