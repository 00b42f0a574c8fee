-- _durable_job.lua: the one place the durable scripts (step, park, signal, steps) read or
-- write a job's record. job_meta(meta_key, id): the decoded record (decode_meta), or nil
-- and the reason it cannot be used. job_save(meta_key, id, meta): write it back.
-- leased_by(k, id, token): the record when the job is leased under `token`, else nil.
--@include decode_meta

local function job_meta(meta_key, id)
  return decode_meta(redis.call('HGET', meta_key, id))
end

local function job_save(meta_key, id, meta)
  redis.call('HSET', meta_key, id, cjson.encode(meta))
end

local function leased_by(meta_key, leased_key, id, token)
  local meta = job_meta(meta_key, id)
  if not meta or meta.t ~= token or not redis.call('ZSCORE', leased_key, id) then
    return nil
  end
  return meta
end
