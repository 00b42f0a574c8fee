-- _drop_record.lua: delete a job's record (body, meta, last error, progress).
--@include count

local function drop_record(body, meta, errors, progress, id)
  redis.call('HDEL', body, id)
  redis.call('HDEL', meta, id)
  soft('HDEL', errors, id)
  soft('HDEL', progress, id)
end
