-- publish_lean.lua: add one job that sets no option but its retries and priority, to a
-- strict queue with no length limits: the writes its state needs and nothing else (the
-- common publish; publish.lua takes every other). The job's record is written first, by
-- HSETNX, which is also the check that its tag is free; the later writes take it back if
-- they fail, so a call writes all or nothing.
--
-- KEYS by role (_keys.lua, engine/keys.py SCRIPT_ROLES; ZQ_BAD_ARGUMENT, nothing written,
--   when a key is missing), in this order: ready ZSET, meta HASH (the job's compact
--   record, _record.lua), ctr HASH (its `seq`), notify LIST, stats HASH (field `en`:
--   the jobs published here, which the scan adds to `enqueued` and to its minute of the
--   series, _series.lua's take_pending), then, read
--   only to name the state of a clashing tag (_tag_state.lua): delayed ZSET, leased
--   ZSET, dead ZSET, wait ZSET, expired ZSET.
-- ARGV[1] the queue's policy, read by name (_policy.lua): mode (must be 'strict'),
--   notify_cap, max_length and group_max_length (both must be 0: publish.lua checks them)
-- ARGV[2] the job's id (1 .. id_bytes bytes)
-- ARGV[3] max_retries, ARGV[4] priority (integers within their bounds, _bounds.lua)
-- ARGV[5] task, ARGV[6] args, ARGV[7] kwargs ('' for {}): the texts of a body of a
--   task's shape, stored as the record's body parts T, A and K (_record.lua)
-- Raises ZQ_BAD_ARGUMENT (nothing written) for arguments out of bounds or a policy this
--   script does not take; ZQ_CORRUPT_KEY (nothing written) for meta, ctr or ready of
--   another type, or a `seq` that is not an integer; ZQ_SEQUENCE_EXHAUSTED (nothing
--   written).
-- Returns: {0} written; or {1, id, state} when the tag is in use (state as publish.lua
--   gives it), nothing written.
-- Work: O(log N): TIME, HSETNX, HINCRBY, ZADD, HINCRBY of the counter, LLEN (and LPUSH
--   of one token when a consumer can be waiting); on a clash, up to 6 ZSCOREs instead.

--@include bounds
--@include now_ms
--@include priority_band
--@include fmt
--@include tag_state
--@include notify
--@include count
--@include guard
--@include policy
--@include keys

local k = key_roles(KEYS, {'ready', 'meta', 'ctr', 'notify', 'stats', 'delayed', 'leased',
  'dead', 'wait', 'expired'})
local policy = read_policy(ARGV[1])
if policy.mode ~= 'strict' or policy.max_length ~= 0 or policy.group_max_length ~= 0 then
  error('ZQ_BAD_ARGUMENT: publish_lean takes a strict queue without max_length or'
    .. ' group_max_length; publish takes the others')
end
local id, m, p = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local t, a, kw = ARGV[5], ARGV[6], ARGV[7]
local id_lo, id_hi = bound('id_bytes')
local m_lo, m_hi = bound('max_retries')
local p_lo, p_hi = bound('priority')
local why = nil
if #ARGV ~= 7 then
  why = 'publish_lean takes 7 arguments: the policy, id, max_retries, priority, task, args'
    .. ' and kwargs'
elseif #id < id_lo or #id > id_hi then
  why = 'a job needs an id of ' .. id_lo .. ' to ' .. id_hi .. ' bytes'
elseif not is_int(m, m_lo, m_hi) then
  why = 'max_retries must be an integer in [' .. m_lo .. ', ' .. m_hi .. ']'
elseif not is_int(p, p_lo, p_hi) then
  why = 'priority must be an integer in [' .. p_lo .. ', ' .. p_hi .. ']'
elseif t == '' then
  why = 'a job needs its task'
end
if why then
  error('ZQ_BAD_ARGUMENT: ' .. why)
end

-- the compact record (_record.lua): a map of m, e, p (when not 0), T, A and K (when
-- kwargs are not {}), packed as pairs after its header
local now = now_ms()
local n, fields = 4, cmsgpack.pack('m', m, 'e', now, 'T', t, 'A', a)
if p ~= 0 then
  n, fields = n + 1, fields .. cmsgpack.pack('p', p)
end
if kw ~= '' then
  n, fields = n + 1, fields .. cmsgpack.pack('K', kw)
end
local record = string.char(0x80 + n) .. fields

-- 1. the record, which claims the tag (a field already there: a clash, nothing written)
local claimed = redis.pcall('HSETNX', k.meta, id, record)
if type(claimed) == 'table' and claimed.err then
  if string.find(claimed.err, 'OOM', 1, true) then
    error(claimed.err)
  end
  error('ZQ_CORRUPT_KEY: ' .. k.meta .. ' is a ' .. redis.call('TYPE', k.meta)['ok']
    .. ', not a hash' .. FIX)
end
if claimed == 0 then
  return {1, id, tag_state(k, id) or 'unknown'}
end
local function unwrite()
  redis.call('HDEL', k.meta, id)
end

-- 2. its sequence number: a ctr or seq of the wrong kind takes the record back
local seq = redis.pcall('HINCRBY', k.ctr, 'seq', 1)
if type(seq) == 'table' and seq.err then
  unwrite()
  counter_reply(seq, k.ctr, 'seq')
end
if seq >= PRIORITY_BAND then
  redis.call('HINCRBY', k.ctr, 'seq', -1)
  unwrite()
  error('ZQ_SEQUENCE_EXHAUSTED: the queue has used 2^42 sequence numbers')
end

-- 3. its place in line (strict: the sequence inside its priority's band)
written_reply(redis.pcall('ZADD', k.ready, fmt(seq - p * PRIORITY_BAND), id), k.ready, 'zset',
  function()
    if redis.call('HINCRBY', k.ctr, 'seq', -1) == 0 then -- (absent before, as HINCRBY reads it)
      redis.call('HDEL', k.ctr, 'seq')
    end
    unwrite()
  end)

count_stat(k.stats, 'en', 1) -- the scan moves it to 'enqueued' and its minute (_series.lua)
notify(k.notify, 1, policy.notify_cap)
return {0}
