-- _guard.lua: all-or-nothing for the keys a script touches (Redis does not roll a script
-- back). guard_keys: raise ZQ_CORRUPT_KEY, before the script's first write, naming the
-- key and the fix, when one of `keys` holds another type than its name says
-- (docs/architecture.md, "Keys of a queue"); an absent key is fine. The stats hash, the
-- notify list and the errors and progress hashes are not checked: their writes cannot
-- stop a script (_count.lua, _notify.lua); a per-job result or reservation is
-- overwritten, whatever it held.
-- The counters the scripts read as numbers are checked the same way: absent, or a
-- number (an integer where they are added to): in `ctr` tok, seq, tseq, clock, dclock, vt,
-- dseq; in
-- a workflow job's `wf:<id>` need and got. counter_reply: the same error for a counter
-- added to by a script's first write (publish's strict sequence), checked by the write.

-- the type of each key by the name after its hash tag; 'errors', 'progress', 'stats',
-- 'notify': see above. In the Functions library these tables are built once, when the
-- library loads; a script sent with EVALSHA (a cluster) builds them on each call.
local KEY_TYPES = {ready = 'zset', delayed = 'zset', leased = 'zset', dead = 'zset',
  sched = 'zset', ginflight = 'zset', gpark = 'zset', gwait = 'zset', gjobs = 'zset',
  wait = 'zset', wf_out = 'zset', expiry = 'zset', expired = 'zset', finished = 'zset',
  cancels = 'zset', body = 'hash', meta = 'hash', ctr = 'hash', rate = 'hash',
  workers = 'hash', sched_defs = 'hash', sched_last = 'hash', gstarts = 'hash',
  gstarts_prev = 'hash', grate = 'hash', wf_res = 'hash', wf = 'hash', steps = 'hash',
  proto = 'hash', history = 'hash', cancelled = 'string', ohold = 'hash', oaside = 'zset',
  okeyed = 'zset'}
-- the fields read as numbers, per key name, and whether each must be an integer (added
-- to with HINCRBY)
local COUNTERS = {
  ctr = {{'tok', 'seq', 'tseq', 'clock', 'dclock', 'vt', 'dseq'},
    {true, true, false, false, false, false, true}},
  wf = {{'need', 'got'}, {true, true}}}
local FIX = ': run manage.py zqueue_doctor --repair (it says what it can repair)'

-- what to check of a key, by its name alone: {type, counters or nil}, or false. The
-- answer depends on the name only, so the library keeps it between calls (at most
-- GUARD_MEMO_MAX names; then it starts again).
local GUARD_MEMO, GUARD_MEMO_N, GUARD_MEMO_MAX = {}, 0, 2000
local function guard_plan(key)
  local plan = GUARD_MEMO[key]
  if plan == nil then
    local name = string.match(key, '}:([%a_]+)')
    local want = name and KEY_TYPES[name]
    plan = want and {want, COUNTERS[name]} or false
    if GUARD_MEMO_N >= GUARD_MEMO_MAX then
      GUARD_MEMO, GUARD_MEMO_N = {}, 0
    end
    GUARD_MEMO[key], GUARD_MEMO_N = plan, GUARD_MEMO_N + 1
  end
  return plan
end

local function guard_keys(keys)
  for _, key in ipairs(keys) do
    local plan = guard_plan(key)
    if plan then
      local want = plan[1]
      local kind = redis.call('TYPE', key)['ok']
      if kind ~= 'none' and kind ~= want then
        error('ZQ_CORRUPT_KEY: ' .. key .. ' is a ' .. kind .. ', not a ' .. want .. FIX)
      end
      local counters = plan[2]
      if counters and kind == 'hash' then
        local fields, whole = counters[1], counters[2]
        local vals = redis.call('HMGET', key, unpack(fields))
        for i, name in ipairs(fields) do
          local v = tonumber(vals[i])
          if vals[i] and not (v and (not whole[i] or v == math.floor(v))) then
            error('ZQ_CORRUPT_KEY: ' .. key .. ' field ' .. name .. ' is not ' ..
              (whole[i] and 'an integer' or 'a number') .. FIX)
          end
        end
      end
    end
  end
end

-- written_reply: the reply of a redis.pcall that writes `key` (of type `want`) as a
-- script's second write, its first write being given back by undo(): an error reply runs
-- undo and becomes ZQ_CORRUPT_KEY, nothing written; out of memory stays itself.
local function written_reply(reply, key, want, undo)
  if type(reply) == 'table' and reply.err then
    undo()
    if string.find(reply.err, 'OOM', 1, true) then
      error(reply.err)
    end
    error('ZQ_CORRUPT_KEY: ' .. key .. ' is a ' .. redis.call('TYPE', key)['ok'] .. ', not a ' ..
      want .. FIX)
  end
  return reply
end

-- counter_reply: the reply of a redis.pcall that adds to counter `name` of HASH `key`
-- (HINCRBY), when that is a script's first write (no guard_keys of `key` before it): an
-- error reply becomes ZQ_CORRUPT_KEY, nothing written; out of memory stays itself.
local function counter_reply(reply, key, name)
  if type(reply) == 'table' and reply.err then
    if string.find(reply.err, 'OOM', 1, true) then
      error(reply.err)
    end
    error('ZQ_CORRUPT_KEY: ' .. key .. ' is not a hash, or its field ' .. name ..
      ' is not an integer' .. FIX)
  end
  return reply
end

