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
-- a workflow job's `wf:<id>` need and got.

-- the type of each key by the name after its hash tag (strings, not a table: a table
-- would be built on every call); 'errors', 'progress', 'stats', 'notify': see above
local ZSETS = ' ready delayed leased dead sched ginflight gpark gwait gjobs wait wf_out expiry expired finished cancels '
local HASHES = ' body meta ctr rate workers sched_defs sched_last gstarts gstarts_prev grate wf_res wf steps proto history '
local STRINGS = ' cancelled '

local function key_type(name)
  if not name then
    return nil
  end
  local word = ' ' .. name .. ' '
  if string.find(ZSETS, word, 1, true) then
    return 'zset'
  elseif string.find(HASHES, word, 1, true) then
    return 'hash'
  elseif string.find(STRINGS, word, 1, true) then
    return 'string'
  end
  return nil
end
-- the fields read as numbers, per key name, and whether each must be an integer (added
-- to with HINCRBY)
local function counters(name)
  if name == 'ctr' then
    return {'tok', 'seq', 'tseq', 'clock', 'dclock', 'vt', 'dseq'},
      {true, true, false, false, false, false, true}
  elseif name == 'wf' then
    return {'need', 'got'}, {true, true}
  end
  return nil, nil
end
local FIX = ': run manage.py zqueue_doctor --repair (it says what it can repair)'

local function guard_keys(keys)
  for _, key in ipairs(keys) do
    local want = key_type(string.match(key, '}:([%a_]+)'))
    if want then
      local kind = redis.call('TYPE', key)['ok']
      if kind ~= 'none' and kind ~= want then
        error('ZQ_CORRUPT_KEY: ' .. key .. ' is a ' .. kind .. ', not a ' .. want .. FIX)
      end
      if kind == 'hash' then
        local fields, whole = counters(string.match(key, '}:(%a+)'))
        if fields then
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
end
