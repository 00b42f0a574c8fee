-- signal.lua: deliver the event `name` to a job (durable wait_for, docs/durable.md): its
-- payload is kept in the job's steps hash ("g:<name>") and read by the job's wait_for,
-- now or on a later run. A job parked for this event (in `delayed`, record `pk` =
-- "w:<name>") is made due at once: the next claim (or scan) puts it back in ready.
--
-- KEYS[1] ready ZSET   KEYS[2] delayed ZSET   KEYS[3] leased ZSET   KEYS[4] dead ZSET
-- KEYS[5] wait ZSET    KEYS[6] meta HASH      KEYS[7] steps HASH (this job's)
-- KEYS[8] notify LIST   KEYS[9] ctr HASH (field dseq: the record's `d`, _durable_job.lua)
-- KEYS[10] stats HASH (counts `signalled`)
-- ARGV[1] id   ARGV[2] name   ARGV[3] payload (JSON)   ARGV[4] max_bytes
-- ARGV[5] keep_ms (TTL of the steps hash when it has none yet)   ARGV[6] max_fields
-- ARGV[7] notify_cap
-- Raises ZQ_BAD_ARGUMENT (nothing written) for bounds out of range, a payload longer
--   than max_bytes, or a hash that already holds max_fields fields.
-- Returns: 2 delivered and the job woken; 1 delivered, kept for its wait_for; 0 no such
--   job (gone, or ended: expired or cancelled), or a record that cannot be used; -1 this
--   event was delivered already (nothing changed: it is consumed once); -2 the job's
--   wait for it timed out (nothing changed).
-- Work: O(log N).

--@include bounds
--@include now_ms
--@include durable_job
--@include notify
--@include count
--@include guard

guard_keys(KEYS)

local id, name, payload = ARGV[1], ARGV[2], ARGV[3]
local longest, keep, most, cap = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
if name == '' or not is_int(longest, 1, MAX_VALUE_BYTES) or not is_int(keep, 1, MAX_DELAY_MS)
  or not is_int(most, 1, MAX_STEP_FIELDS) or not is_int(cap, 0, MAX_NOTIFY_CAP) then
  error('ZQ_BAD_ARGUMENT: signal: bad name or bounds')
end
if #payload > longest then
  error('ZQ_BAD_ARGUMENT: signal payload is ' .. #payload .. ' bytes, more than ' .. longest)
end
local meta = job_meta(KEYS[6], id)
if not meta then
  return 0
end
local live = false
for i = 1, 5 do
  if redis.call('ZSCORE', KEYS[i], id) then
    live = true
    break
  end
end
if not live then
  return 0
end
local field = 'g:' .. name
local mine = records_of(KEYS[7], meta)
if mine and redis.call('HEXISTS', KEYS[7], field) == 1 then
  return -1
end
local now = now_ms()
local deadline = mine and tonumber(redis.call('HGET', KEYS[7], 'w:' .. name))
if deadline and deadline <= now then
  return -2
end
if mine and redis.call('HLEN', KEYS[7]) > most then -- (`@e` is one of them)
  error('ZQ_BAD_ARGUMENT: the job already holds ' .. most .. ' durable records')
end
local given = own_records(KEYS[7], meta, KEYS[9])
redis.call('HSET', KEYS[7], field, payload)
count_stat(KEYS[10], 'signalled', 1)
if redis.call('PTTL', KEYS[7]) < keep then
  redis.call('PEXPIRE', KEYS[7], keep)
end
if meta.pk == 'w:' .. name and redis.call('ZSCORE', KEYS[2], id) then
  meta.pk = nil
  job_save(KEYS[6], id, meta)
  redis.call('ZADD', KEYS[2], 'XX', now, id)
  notify(KEYS[8], 1, cap)
  return 2
end
if given then
  job_save(KEYS[6], id, meta)
end
return 1
