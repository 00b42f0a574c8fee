-- park.lua: end a run without using an attempt, the job waiting in `delayed` until a
-- time (durable sleep) or a signal (durable wait_for, with a timeout): docs/durable.md.
-- Fenced by the delivery token. The first park under a name records its wake time in
-- the steps hash (`z:<name>` sleep, `w:<name>` wait); a later park under the same name
-- keeps that time. The record gets `d` (step records to delete) and `pk`
-- ("z:<name>"/"w:<name>": what it waits for; cleared by steps.lua and signal.lua).
--
-- KEYS[1] leased ZSET   KEYS[2] delayed ZSET   KEYS[3] meta HASH   KEYS[4] steps HASH
-- KEYS[5] progress HASH   KEYS[6] notify LIST   KEYS[7] ctr HASH (field dseq: the
--   record's `d`, see _durable_job.lua)   KEYS[8] stats HASH (counts `parked`)
-- ARGV[1] id   ARGV[2] token   ARGV[3] field ("z:<name>" or "w:<name>")
-- ARGV[4] ms (how long from now, 0 .. 3650 days; used when the field is new)
-- ARGV[5] keep_ms (the steps hash's TTL beyond the wake time)   ARGV[6] max_fields
-- ARGV[7] notify_cap
-- Raises ZQ_BAD_ARGUMENT (nothing written) for arguments out of bounds, or a new field
--   in a hash that already holds max_fields fields.
-- Returns: {1, wake_ms} parked; {2, payload} not parked: the signal this wait is for is
--   there ("g:<name>"); {3, wake_ms} not parked: the wake time has passed; {0} stale
--   (not leased under this token, or a record that cannot be used): nothing changed.
-- Work: O(log N).

--@include bounds
--@include now_ms
--@include durable_job
--@include notify
--@include count
--@include guard

guard_keys(KEYS)

local id, token, field = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local ms, keep, most, cap = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local kind, name = string.match(field, '^([zw]):(.+)$')
if not kind or not is_int(ms, 0, MAX_DELAY_MS) or not is_int(keep, 1, MAX_DELAY_MS)
  or not is_int(most, 1, MAX_STEP_FIELDS) or not is_int(cap, 0, MAX_NOTIFY_CAP) then
  error('ZQ_BAD_ARGUMENT: park: bad field or bounds')
end
local meta = leased_by(KEYS[3], KEYS[1], id, token)
if not meta then
  return {0}
end
local mine = records_of(KEYS[4], meta)
if kind == 'w' and mine then
  local payload = redis.call('HGET', KEYS[4], 'g:' .. name)
  if payload then
    return {2, payload}
  end
end
local now = now_ms()
local wake = mine and tonumber(redis.call('HGET', KEYS[4], field))
if not wake then
  if mine and redis.call('HLEN', KEYS[4]) > most then -- (`@e` is one of them)
    error('ZQ_BAD_ARGUMENT: the job already holds ' .. most .. ' durable records')
  end
  wake = now + ms
  own_records(KEYS[4], meta, KEYS[7])
  redis.call('HSET', KEYS[4], field, wake)
end
if wake <= now then
  return {3, wake}
end
redis.call('PEXPIRE', KEYS[4], wake - now + keep)
redis.call('ZREM', KEYS[1], id)
redis.call('ZADD', KEYS[2], wake, id)
meta.a = math.max(0, (meta.a or 1) - 1) -- the attempt is not counted
meta.t, meta.c, meta.q = nil, nil, nil
meta.pk = field
job_save(KEYS[3], id, meta)
soft('HDEL', KEYS[5], id)
count_stat(KEYS[8], 'parked', 1)
notify(KEYS[6], 1, cap) -- a slot is free (concurrency limit); and the earliest run-at moved
return {1, wake}
