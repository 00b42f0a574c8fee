-- step.lua: record one durable step's result (docs/durable.md), fenced by the delivery
-- token: only the worker that holds the job's lease may write. The job's record gets
-- `d` (it has step records: ack.lua deletes them).
--
-- KEYS[1] leased ZSET   KEYS[2] meta HASH   KEYS[3] steps HASH (this job's)
-- KEYS[4] ctr HASH (field dseq: the record's `d`, see _durable_job.lua)
-- ARGV[1] id   ARGV[2] token   ARGV[3] field ("s:<name>")   ARGV[4] value (JSON)
-- ARGV[5] max_fields (most fields the hash may hold)   ARGV[6] max_bytes (longest value)
-- ARGV[7] keep_ms (TTL of the steps hash, 1 ms .. 3650 days)
-- ARGV[8] (optional) '1': replace the field's value when it is recorded already (an
--   iteration's cursor, "i:<name>", durable.iterate); absent or '0': the first record
--   stands
-- Raises ZQ_BAD_ARGUMENT (nothing written) for bounds out of range, a value longer than
--   max_bytes, a replace flag that is not '0' or '1', or a new field in a hash that
--   already holds max_fields fields.
-- Returns: 1 recorded (or replaced); 2 already recorded and not to be replaced (nothing
--   changed: the first record stands);
--   0 stale (not leased under this token, or a record that cannot be used): nothing
--   changed.
-- Work: O(1).

--@include bounds
--@include durable_job
--@include guard

guard_keys(KEYS)

local id, token, field, value = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local most, longest, keep = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
if not is_int(most, 1, MAX_STEP_FIELDS) or not is_int(longest, 1, MAX_VALUE_BYTES)
  or not is_int(keep, 1, MAX_DELAY_MS) or field == ''
  or (ARGV[8] ~= nil and ARGV[8] ~= '0' and ARGV[8] ~= '1') then
  error('ZQ_BAD_ARGUMENT: step: bad bounds, empty field or a replace flag not 0 or 1')
end
local replace = ARGV[8] == '1'
if #value > longest then
  error('ZQ_BAD_ARGUMENT: step result is ' .. #value .. ' bytes, more than ' .. longest)
end
local meta = leased_by(KEYS[2], KEYS[1], id, token)
if not meta then
  return 0
end
local mine = records_of(KEYS[3], meta)
local exists = mine and redis.call('HEXISTS', KEYS[3], field) == 1
if exists and not replace then
  return 2
end
if mine and not exists and redis.call('HLEN', KEYS[3]) > most then -- (`@e` is one of them)
  error('ZQ_BAD_ARGUMENT: the job already holds ' .. most .. ' durable records')
end
local given = own_records(KEYS[3], meta, KEYS[4])
redis.call('HSET', KEYS[3], field, value)
redis.call('PEXPIRE', KEYS[3], keep)
if given then
  job_save(KEYS[2], id, meta)
end
return 1
