-- steps.lua: a run's one read of its job's durable records (docs/durable.md), at its
-- first durable call: every field of the job's steps hash, with Redis TIME. While the
-- job is leased under `token`, the hash's TTL is renewed (keep_ms) and a `pk` (parked,
-- set by park.lua) is cleared from the record: the job runs again. With token '' it only
-- reads (the admin's job page), whatever the job's state: nothing is written.
--
-- KEYS[1] leased ZSET   KEYS[2] meta HASH   KEYS[3] steps HASH (this job's)
-- ARGV[1] id   ARGV[2] token ('' = read only)   ARGV[3] keep_ms (TTL of the steps hash,
--   1 ms .. 3650 days)
-- Raises ZQ_BAD_ARGUMENT (nothing written) for a keep_ms out of bounds.
-- Returns: {now_ms, leased (1 this delivery holds the lease, else 0), field1, value1, ...}
--   (the fields only while leased, or read only, and only the records of this job: `@e`,
--   see _durable_job.lua, is among them)
-- Work: O(F) for F fields (at most the steps bound).

--@include bounds
--@include now_ms
--@include durable_job
--@include guard

guard_keys(KEYS)

local id, token, keep = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if not is_int(keep, 1, MAX_DELAY_MS) then
  error('ZQ_BAD_ARGUMENT: keep_ms must be an integer in [1, ' .. MAX_DELAY_MS .. ']')
end
local reader = ARGV[2] == ''
local meta
if reader then
  meta = job_meta(KEYS[2], id)
else
  meta = leased_by(KEYS[2], KEYS[1], id, token)
end
local fields = {}
if meta and records_of(KEYS[3], meta) then
  fields = redis.call('HGETALL', KEYS[3])
end
if reader then
  meta = nil -- (nothing to write, and not leased by a token)
end
if meta then
  if #fields > 0 then
    redis.call('PEXPIRE', KEYS[3], keep)
  end
  if meta.pk then
    meta.pk = nil
    job_save(KEYS[2], id, meta)
  end
end
local out = {now_ms(), meta and 1 or 0}
for i = 1, #fields do
  out[i + 2] = fields[i]
end
return out
