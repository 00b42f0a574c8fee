-- _history.lua: the history of finished jobs (docs/architecture.md, "The history of
-- finished jobs"). A job that succeeded (ack, ack_many) or was cancelled (cancel) keeps a
-- small record in the `history` HASH, indexed by the ms it ended in `finished`
-- (succeeded) or `cancels` (cancelled); a tag has at most one entry in the two. Each
-- index is bounded by count (`keep`) and age (`ttl_ms`), trimmed in bounded steps by the
-- script that adds to it and by scan.
-- kept_record(raw, head, body_hash, id): the value kept for job `id` whose stored record
--   is `raw`: `head`, a MessagePack map (`fa` the ms it ended; `rt` its run time in ms,
--   `was` the state a cancel took it from), then the record as it was, in the compact
--   layout of _record.lua (a JSON-layout record is made compact, its body read from
--   `body_hash`): no field of the record is unpacked or packed again.
-- ended_head(fa, rt, memo): kept_record's head {fa = fa, rt = rt} of a job that ended at
--   `fa` after `rt` ms (nil: not measured), encoded once per distinct `rt` among the jobs
--   of one call (`memo`, a table of the call's own; they share `fa`): a MessagePack map
--   made of its header and the key and value encodings, which is what cmsgpack.pack of
--   the table gives (in some key order), at a fraction of the cost.
-- keep_ended(index, other, history, ids, fields, t, other_empty, optional): jobs ids[i]
--   ended now
--   (`t`: the call's TIME reply, or nil to read it), kept with their records (`fields`:
--   HSET's arguments, each id then its kept_record, in the order of `ids`): added to
--   `index` and `history`, taken out of `other` (the other index;
--   not touched when the caller read it empty). Their score is Redis TIME in ms with the
--   microseconds as a fraction, so the ends of two calls keep their order (the jobs of
--   one call share it). One TIME, one HSET, one ZADD and one ZREM for all; the HSET goes
--   first and a `history` of another type fails it as ZQ_CORRUPT_KEY, so that, called
--   before a script's other writes with `index` and `other` read (index_sizes), it
--   needs no check of its keys. Returns how many ids were new to `index` (ZADD's reply).
--   `optional` (ack, ack_many: the history is an optional write): a `history` of another
--   type is not an error: nothing is written, and it returns nil (out of memory still
--   raises).
-- trim_history(index, history, now, keep, ttl_ms, limit, logs): remove the entries of
--   `index` older than ttl_ms, then the oldest beyond `keep`, at most `limit` in all, with
--   their records and, when `logs` (the queue's logs HASH) is given, their logs. Returns how many were removed and whether more remain to trim. (scan.lua:
--   the age bound is kept by the scanner's steps.)
-- drop_logs(logs, ids): the logs of jobs `ids` dropped from the `logs` HASH (nil: not
--   passed, nothing); soft: a `logs` key of another type is left as it is (the doctor
--   names it), so a history trim never fails on it.
-- bound_history(index, history, keep, room, trim, size, logs): the count bound on the write path
--   (ack, ack_many, cancel), which adds `room` entries: one ZCARD (none when the caller
--   gives `size`, the entries of `index` after its adds), and only once `index` holds
--   more than keep + slack (slack = min(trim, keep // 100): about 1% of keep, so that one
--   job at a time is not trimmed one at a time) the oldest beyond `keep` are removed, at
--   most room + trim, with their logs (drop_logs). Returns how many.
-- index_sizes(finished, cancels): the entries of the two indexes, read before a
--   script's first write instead of checking their types (guard_keys): the size of
--   `finished` and whether `cancels` is empty (then keep_ended need not take anything out
--   of it); nil when either holds another type, nothing written: the history is an
--   optional write (ack, ack_many), so the caller then acks without keeping one (the
--   scanner's scan names the key and its repair).
--@include fmt
--@include guard

local function index_sizes(finished, cancels)
  local f = redis.pcall('ZCARD', finished)
  local c = redis.pcall('ZCARD', cancels)
  if type(f) == 'table' or type(c) == 'table' then -- an error reply: a wrong type
    return nil, false
  end
  return f, c == 0
end

local function ended_head(fa, rt, memo)
  local key = rt or false
  local head = memo[key]
  if head == nil then
    local fa_part = memo.fa
    if fa_part == nil then
      fa_part = cmsgpack.pack('fa', fa)
      memo.fa = fa_part
    end
    if rt == nil then
      head = '\129' .. fa_part -- a map of 1
    else
      head = '\130' .. fa_part .. cmsgpack.pack('rt', rt) -- a map of 2
    end
    memo[key] = head
  end
  return head
end

-- with_errors(head, errors): ended_head's `head` (a map of 1 or 2) with `er`, the job's
--   `errors` value (_attempts.lua) as it was when it ended, added; `head` when errors is
--   false (none). A new string: the memo's head is not changed.
local function with_errors(head, errors)
  if not errors then
    return head
  end
  return string.char(string.byte(head, 1) + 1) .. string.sub(head, 2)
    .. cmsgpack.pack('er', errors)
end

-- soft_value(reply): a redis.pcall reply, or false when it is an error (a key of another
--   type read by an optional part of a script)
local function soft_value(reply)
  if type(reply) == 'table' and reply.err then
    return false
  end
  return reply
end

local function kept_record(raw, head, body_hash, id)
  if string.byte(raw, 1) ~= 123 then
    return head .. raw
  end
  local ok, fields = pcall(cjson.decode, raw)
  if not ok or type(fields) ~= 'table' then
    fields = {}
  end
  fields.b = nil
  return head .. cmsgpack.pack(fields) .. (redis.call('HGET', body_hash, id) or '')
end

local function keep_ended(index, other, history, ids, fields, t, other_empty, optional)
  t = t or redis.call('TIME')
  local now = fmt(tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000)
  local scores = {}
  for i, id in ipairs(ids) do
    scores[2 * i - 1] = now
    scores[2 * i] = id
  end
  -- the first write: a `history` of another type fails it, nothing written (ack_many
  -- checks that key no other way)
  local reply = redis.pcall('HSET', history, unpack(fields))
  local failed = type(reply) == 'table' and reply.err
  if optional and failed and not string.find(reply.err, 'OOM', 1, true) then
    return nil
  end
  written_reply(reply, history, 'hash', function() end)
  local added = redis.call('ZADD', index, unpack(scores))
  if not other_empty then
    redis.call('ZREM', other, unpack(ids))
  end
  return added
end

local function drop_logs(logs, ids)
  if logs and #ids > 0 then
    redis.pcall('HDEL', logs, unpack(ids))
  end
end

local function bound_history(index, history, keep, room, trim, size, logs)
  local excess = (size or redis.call('ZCARD', index)) - keep
  if excess <= math.min(trim, math.floor(keep / 100)) then
    return 0
  end
  local last = math.min(excess, room + trim) - 1
  local ids = redis.call('ZRANGE', index, 0, last)
  redis.call('ZREMRANGEBYRANK', index, 0, last)
  redis.call('HDEL', history, unpack(ids))
  drop_logs(logs, ids)
  return #ids
end

local function trim_history(index, history, now, keep, ttl_ms, limit, logs)
  local removed, more = 0, false
  if limit < 1 then
    return 0, redis.call('ZCARD', index) > keep
  end
  local old = redis.call('ZRANGEBYSCORE', index, '-inf', '(' .. fmt(now - ttl_ms), 'LIMIT', 0, limit)
  if #old > 0 then
    redis.call('ZREM', index, unpack(old))
    redis.call('HDEL', history, unpack(old))
    drop_logs(logs, old)
    removed = #old
    more = (#old == limit)
  end
  local excess = redis.call('ZCARD', index) - keep
  if excess > 0 then
    local room = limit - removed
    if excess > room then
      more = true
      excess = room
    end
    if excess > 0 then
      local ids = redis.call('ZRANGE', index, 0, excess - 1)
      redis.call('ZREMRANGEBYRANK', index, 0, excess - 1)
      redis.call('HDEL', history, unpack(ids))
      drop_logs(logs, ids)
      removed = removed + #ids
    end
  end
  return removed, more
end
