-- _durable_job.lua: the one place the durable scripts (step, park, signal, steps) read or
-- write a job's record. job_meta(meta_key, id): the decoded record (decode_meta), or nil
-- and the reason it cannot be used. job_save(meta_key, id, meta): write it back.
-- leased_by(meta_key, leased_key, id, token): the record when the job is leased under
-- `token`, else nil. A job with durable records has `d` in its record, a number from
-- `ctr` field `dseq` (never repeated), and its steps hash holds it as `@e`:
-- records_of(steps_key, meta) says whether the hash holds this job's records (false: none,
-- or an earlier job's of the same tag, a dead letter purged or trimmed whose hash is left
-- to expire); own_records(steps_key, meta, ctr_key) makes it this job's (gives the record
-- its `d`, deletes an earlier job's records): a write, after the script's checks.
--@include decode_meta
--@include record

local function job_meta(meta_key, id)
  return decode_meta(redis.call('HGET', meta_key, id))
end

local function job_save(meta_key, id, meta)
  redis.call('HSET', meta_key, id, (encode_record(meta)))
end

local function leased_by(meta_key, leased_key, id, token)
  local meta = job_meta(meta_key, id)
  if not meta or meta.t ~= token or not redis.call('ZSCORE', leased_key, id) then
    return nil
  end
  return meta
end

local function incarnation(meta)
  local d = tonumber(meta.d)
  return d and string.format('%.0f', d) or nil
end

local function records_of(steps_key, meta)
  local mark = incarnation(meta)
  return mark ~= nil and redis.call('HGET', steps_key, '@e') == mark
end

-- returns true when it gave the record its `d` (the caller saves the record)
local function own_records(steps_key, meta, ctr_key)
  if records_of(steps_key, meta) then
    return false
  end
  local given = false
  if not incarnation(meta) then
    meta.d = redis.call('HINCRBY', ctr_key, 'dseq', 1) -- first: it may raise (no write yet)
    given = true
  end
  redis.call('DEL', steps_key)
  redis.call('HSET', steps_key, '@e', incarnation(meta))
  return given
end
