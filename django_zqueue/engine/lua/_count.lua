-- _count.lua: writes that can never stop a script half-way. soft: a write to a key
-- that only informs (a job's last error, its progress): on a key of the wrong type it is
-- skipped (zqueue_doctor names the key). count_stat: add `n` to a lifetime counter of the stats HASH. It never raises:
-- a field that is not an integer starts again from `n`, and a stats key of the wrong
-- type loses the count (zqueue_doctor reports both), so a counter can never stop a
-- script half-way.

-- Out of memory is not swallowed (raise_oom): the script stops there, as at any write.

local function raise_oom(ok, err)
  if not ok and string.find(tostring(err), 'OOM', 1, true) then
    error(err)
  end
  return ok
end

local function count_stat(stats, field, n)
  if not raise_oom(pcall(redis.call, 'HINCRBY', stats, field, n)) then
    raise_oom(pcall(redis.call, 'HSET', stats, field, n))
  end
end

local function soft(command, key, ...)
  raise_oom(pcall(redis.call, command, key, ...))
end
