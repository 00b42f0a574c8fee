-- wf_resolve.lua: apply the ends of parents to their dependents in this shard; each
-- (dependent, parent index) counts once, so a replay changes nothing (idempotent).
--   succeeded: the result is kept as r<index> in the dependent's links; with every
--     parent in, a waiting dependent enters ready (its own priority, back of the line);
--     a dependent dead because of a failed parent is revived once no failed parent is
--     left (to ready, or back to waiting).
--   failed: a waiting dependent goes to dead letters with the error
--     'dependency <parent> failed' (record field `f`: its failed parents, {index, tag}
--     pairs; the error names the first one left); its own dependents are told through the outbox (_wf_mark.lua).
--   revived (the parent was itself revived, and waits again): a dependent dead on its
--     account only goes back to waiting, and tells its own dependents the same.
-- An optional place (the dependent's links field `opt`: '*' every place, or a JSON list
--   of places) takes any end: a failed parent counts as in, its r<index> the marker
--   '!' .. reason (dead, cancelled, deleted, expired: never JSON), so the dependent still
--   enters ready with every parent in; a revived one takes its marker back (got - 1),
--   and a later success replaces the marker while the dependent still waits.
-- A dependent that is in line, in flight, delayed or gone is left alone, and so is one
--   whose links (`par`) do not name this parent at this index (a tag reused after its
--   job was cancelled or deleted: the entry is the old job's); a waiting one
--   whose record cannot be used (_decode_meta.lua) goes to dead letters as corrupt.
--
-- KEYS by role (_keys.lua, engine/keys.py SCRIPT_ROLES; ZQ_BAD_ARGUMENT, nothing
--   written, when a key is not its role's), in this order:
-- ready ZSET   wait   ZSET  dead  ZSET  meta  HASH
-- errors HASH  ctr    HASH  stats HASH  notify LIST
-- wf_out ZSET  wf_res HASH
-- KEYS[10 + i] wf HASH of the dependent of entry i, i = 1..m
-- ARGV[1] the queue's policy, read by name (_policy.lua): mode, aging_us, notify_cap
-- ARGV[1 + i] entry i, i = 1..m (1..100), a MessagePack map read by name (_entry.lua):
--   `child` (the dependent's id), `place` (the parent's index, 1..MAX_LINKS), `end` ('1'
--   succeeded, '0' failed, 'r' revived), `result` (JSON when succeeded, the reason when
--   failed: '' = dead, 'cancelled', 'deleted', 'expired'; absent = ''), `parent` (its
--   tag, for the error text)
-- Raises ZQ_BAD_ARGUMENT (nothing written) for arguments out of bounds, or a policy that
--   is not one (_policy.lua).
-- Returns: {released, killed, revived, <ids of buried or revived dependents that have
--   dependents: their outbox entries to dispatch next>}
-- Work: O(m log N) plus the results written.

--@include bounds
--@include decode_meta
--@include now_ms
--@include ready_scores
--@include tick_us
--@include fmt
--@include series
--@include notify
--@include wf_mark
--@include bury_corrupt
--@include count
--@include guard
--@include record
--@include attempts
--@include entry
--@include policy
--@include keys

local k = key_roles(KEYS, {'ready', 'wait', 'dead', 'meta', 'errors', 'ctr', 'stats', 'notify',
  'wf_out', 'wf_res'})

guard_keys(KEYS)

local policy = read_policy(ARGV[1])
local mode, aging_us, cap = policy.mode, policy.aging_us, policy.notify_cap
local m = #ARGV - 1
if m < 1 or m > 100 or #KEYS ~= 10 + m then
  error('ZQ_BAD_ARGUMENT: wf_resolve needs 1..100 entries, one wf key each')
end
local entries = {}
for i = 1, m do
  local e = entry(ARGV[1 + i])
  local result = e and (e.result or '')
  if not e or type(e.child) ~= 'string' or e.child == '' or not is_int(e.place, 1, MAX_LINKS)
    or not (e['end'] == '1' or e['end'] == '0' or e['end'] == 'r')
    or type(result) ~= 'string' or type(e.parent) ~= 'string' then
    error('ZQ_BAD_ARGUMENT: entry ' .. i .. ': needs a child id, a place in [1, '
      .. MAX_LINKS .. '], an end 1, 0 or r, a result text and a parent')
  end
  entries[i] = {e.child, e.place, e['end'], result, e.parent}
end

local now = now_ms()
local released, killed, revived, cascade = 0, 0, 0, {}

-- record field `f`: the failed parents, as {index, tag} pairs
local function without(list, x)
  local out = {}
  for _, v in ipairs(list or {}) do
    if type(v) == 'table' and v[1] ~= x then
      out[#out + 1] = v
    end
  end
  return out
end

-- still dead for another failed parent: the error names that one
local function blame(id, left)
  add_attempts(k.errors, now, {{id, 'dependency ' .. tostring(left[1][2]) .. ' failed'}})
end

-- whether `parent` is the dependent's parent at `index` (its links' `par` list): an entry
-- from a parent whose dependent was cancelled or deleted, its tag since reused by a new
-- job, is not that job's. Decoded once per call; links without `par`, or with a `par` of
-- more than PAR_CHECK_MAX bytes (a chord of a few thousand members: its decode would cost
-- each call milliseconds), are trusted.
local PAR_CHECK_MAX = 65536
local pars = {}
local function is_parent(wf, index, parent)
  local list = pars[wf]
  if list == nil then
    list = false
    local raw = redis.call('HGET', wf, 'par')
    if raw and #raw <= PAR_CHECK_MAX then
      local ok, decoded = pcall(cjson.decode, raw)
      list = ok and type(decoded) == 'table' and decoded or {}
    end
    pars[wf] = list
  end
  if not list then
    return true
  end
  local ref = list[index]
  return type(ref) == 'table' and ref[2] == parent
end

-- whether place `index` of the dependent takes any end of its parent (links field `opt`:
-- '*' all, or a JSON list of places); decoded once per call
local opts = {}
local function is_optional(wf, index)
  local set = opts[wf]
  if set == nil then
    set = false
    local raw = redis.call('HGET', wf, 'opt')
    if raw == '*' then
      set = true
    elseif raw then
      local ok, decoded = pcall(cjson.decode, raw)
      set = {}
      if ok and type(decoded) == 'table' then
        for _, v in ipairs(decoded) do
          set[v] = true
        end
      end
    end
    opts[wf] = set
  end
  if type(set) == 'table' then
    return set[index] == true
  end
  return set
end

local function is_marker(v)
  return v and string.sub(v, 1, 1) == '!'
end

-- into line (all parents in) or back to waiting
local function enter(id, meta, wf)
  local got = tonumber(redis.call('HGET', wf, 'got') or '0')
  if got >= (meta.n or 0) then
    local score = fmt(ready_score(k.ctr, meta, mode, aging_us))
    redis.call('ZADD', k.ready, score, id)
    notify(k.notify, 1, cap)
    released = released + 1
  else
    redis.call('ZADD', k.wait, now, id)
  end
end

for i = 1, m do
  local id, index, e, result, parent = unpack(entries[i])
  local ok = e == '1'
  if e == 'r' then
    ok = nil
  end
  local wf = KEYS[10 + i]
  local raw = redis.call('HGET', k.meta, id)
  local meta, why = decode_meta(raw)
  if raw and not meta and redis.call('ZSCORE', k.wait, id) then
    -- a waiting dependent whose record cannot be used: to dead letters on its own
    -- account, so the entry is applied to the others and cleared (no poison entry)
    bury_corrupt(k, {{id, why, raw}}, now, k.wait)
  end
  if meta and not is_parent(wf, index, parent) then
    meta = nil -- not this job's parent: left alone
  end
  local waiting = meta and redis.call('ZSCORE', k.wait, id)
  local dead = meta and not waiting and type(meta.f) == 'table' and redis.call('ZSCORE', k.dead, id)
  local marker = false -- a failed parent at an optional place: counts as in
  if e == '0' and (waiting or dead) and is_optional(wf, index) then
    ok, marker = true, true
    result = '!' .. (result ~= '' and result or 'dead')
  end
  if ok == nil and (waiting or dead) and is_marker(redis.call('HGET', wf, 'r' .. index)) then
    redis.call('HDEL', wf, 'r' .. index) -- the optional parent waits again
    redis.call('HINCRBY', wf, 'got', -1)
  end
  if ok == nil then
    if dead and #without(meta.f, index) < #meta.f then
      local left = without(meta.f, index)
      if #left == 0 then
        meta.f = nil
        redis.call('ZREM', k.dead, id)
        soft('HDEL', k.errors, id)
        redis.call('PERSIST', wf)
        redis.call('ZADD', k.wait, now, id)
        revived = revived + 1
        if wf_mark(k.wf_out, k.wf_res, id, meta, 'r', nil, now) and meta.k then
          cascade[#cascade + 1] = id
        end
      else
        meta.f = left
        blame(id, left)
      end
      redis.call('HSET', k.meta, id, (encode_record(meta)))
    end
  elseif ok and (waiting or dead) then
    if redis.call('HSETNX', wf, 'r' .. index, result) == 1 then
      redis.call('HINCRBY', wf, 'got', 1)
    elseif not marker and is_marker(redis.call('HGET', wf, 'r' .. index)) then
      redis.call('HSET', wf, 'r' .. index, result) -- revived and succeeded since
    end
    if waiting then
      if tonumber(redis.call('HGET', wf, 'got')) >= (meta.n or 0) then
        redis.call('ZREM', k.wait, id)
        enter(id, meta, wf)
      end
    elseif not marker and #without(meta.f, index) < #meta.f then
      -- it had failed (now revived); a marker, or a parent that had not failed, changes
      -- nothing else (no rewrite of a record whose failed parents are thousands)
      local left = without(meta.f, index)
      if #left == 0 then -- no failed parent left: revived
        meta.f = nil
        redis.call('ZREM', k.dead, id)
        soft('HDEL', k.errors, id)
        redis.call('PERSIST', wf)
        redis.call('HSET', k.meta, id, (encode_record(meta)))
        enter(id, meta, wf)
        revived = revived + 1
        if wf_mark(k.wf_out, k.wf_res, id, meta, 'r', nil, now) and meta.k then
          cascade[#cascade + 1] = id
        end
      else
        meta.f = left
        blame(id, left)
        redis.call('HSET', k.meta, id, (encode_record(meta)))
      end
    end
  elseif not ok and (waiting or dead) then
    local failed = without(meta.f, index)
    failed[#failed + 1] = {index, parent}
    meta.f = failed
    redis.call('HSET', k.meta, id, (encode_record(meta)))
    if waiting then
      redis.call('ZREM', k.wait, id)
      redis.call('ZADD', k.dead, fmt(tick_us(k.ctr, 'dclock') / 1000), id)
      add_attempts(k.errors, now, {{id, 'dependency ' .. parent .. ' failed'}})
      count_stat(k.stats, 'dead', 1)
      bump(k.stats, 'd', 1, now)
      killed = killed + 1
      if wf_mark(k.wf_out, k.wf_res, id, meta, false, nil, now) and meta.k then
        cascade[#cascade + 1] = id
      end
    end
  end
end
local reply = {released, killed, revived}
for _, id in ipairs(cascade) do
  reply[#reply + 1] = id
end
return reply
