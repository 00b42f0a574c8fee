-- _guard.lua: all-or-nothing for the keys a script touches (Redis does not roll a script
-- back). guard_keys: raise ZQ_CORRUPT_KEY, before the script's first write, naming the
-- key and the fix, when one of `keys` holds another type than its name says
-- (docs/architecture.md, "Keys of a queue"); an absent key is fine. The stats hash, the
-- notify list and the errors and progress hashes are not checked: their writes cannot
-- stop a script (_count.lua, _notify.lua); a per-job result or reservation is
-- overwritten, whatever it held.
-- The counters the scripts read as numbers are checked the same way: absent, or a
-- number (an integer where they are added to): in `ctr` tok, seq, tseq, clock, dclock, vt; in
-- a workflow job's `wf:<id>` need and got.

local KEY_TYPES = {ready = 'zset', delayed = 'zset', leased = 'zset', dead = 'zset',
  body = 'hash', meta = 'hash', ctr = 'hash',
  rate = 'hash', workers = 'hash', sched = 'zset', sched_defs = 'hash', sched_last = 'hash',
  gstarts = 'hash', gstarts_prev = 'hash', ginflight = 'zset', grate = 'hash', gpark = 'zset',
  gwait = 'zset', wait = 'zset', wf_out = 'zset', wf_res = 'hash', expiry = 'zset',
  expired = 'zset', wf = 'hash', cancelled = 'string'}
-- the fields read as numbers, per key name (INTEGER: those added to with HINCRBY)
local COUNTERS = {ctr = {'tok', 'seq', 'tseq', 'clock', 'dclock', 'vt'}, wf = {'need', 'got'}}
local INTEGER = {tok = true, seq = true, need = true, got = true}
local FIX = ': run manage.py zqueue_doctor --repair (it says what it can repair)'

local function guard_keys(keys)
  for _, key in ipairs(keys) do
    local want = KEY_TYPES[string.match(key, '}:([%a_]+)') or '']
    if want then
      local kind = redis.call('TYPE', key)['ok']
      if kind ~= 'none' and kind ~= want then
        error('ZQ_CORRUPT_KEY: ' .. key .. ' is a ' .. kind .. ', not a ' .. want .. FIX)
      end
      if kind == 'hash' then
        local fields = COUNTERS[string.match(key, '}:(%a+)')]
        if fields then
          local vals = redis.call('HMGET', key, unpack(fields))
          for i, name in ipairs(fields) do
            local v = tonumber(vals[i])
            if vals[i] and not (v and (INTEGER[name] == nil or v == math.floor(v))) then
              error('ZQ_CORRUPT_KEY: ' .. key .. ' field ' .. name .. ' is not ' ..
                (INTEGER[name] and 'an integer' or 'a number') .. FIX)
            end
          end
        end
      end
    end
  end
end
