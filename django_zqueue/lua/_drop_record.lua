-- _drop_record.lua: delete a job's record (body, meta, last error, progress).

local function drop_record(body, meta, errors, progress, id)
  redis.call('HDEL', body, id)
  redis.call('HDEL', meta, id)
  redis.call('HDEL', errors, id)
  redis.call('HDEL', progress, id)
end
