-- _room.lua: the queue limit max_length (conf.py QueueOptions.max_length).
-- check_room: raise ZQ_QUEUE_FULL, before any write, unless the jobs waiting in this
--   shard (ready + delayed) and `n` more fit in `max_length` (0: no limit). Jobs waiting
--   for their parents, and jobs coming back (retries, releases, recovered leases,
--   requeued dead letters, released dependents), are never refused: only new ones are.
local function check_room(k, max_length, n)
  if max_length > 0 and n > 0 then
    local waiting = redis.call('ZCARD', k.ready) + redis.call('ZCARD', k.delayed)
    if waiting + n > max_length then
      error(string.format('ZQ_QUEUE_FULL: %d jobs wait and %d more would pass max_length %d;'
        .. ' nothing was written: retry later, or raise the queue option max_length',
        waiting, n, max_length))
    end
  end
end
