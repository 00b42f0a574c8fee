-- claim.lua: lease up to `batch` ready jobs to one consumer, within the queue's global
-- limits (max in flight, starts per second); first promotes due delayed jobs. A job
-- whose record cannot be used (meta or body) goes to dead letters on its own, with the
-- reason 'corrupt record: ...'; the other jobs of the call are leased as usual.
--
-- KEYS by role (_keys.lua, engine/keys.py SCRIPT_ROLES; ZQ_BAD_ARGUMENT, nothing
--   written, when a key is not its role's), in this order:
--   ready ZSET, delayed ZSET, leased ZSET, body HASH (JSON-layout bodies), meta HASH
--   (records, _record.lua), ctr HASH, rate HASH, stats HASH, dead ZSET, errors HASH,
--   paused STRING (present: the queue is paused, nothing is claimed nor promoted and the
--   hint is -1), expiry ZSET, expired ZSET, wf_out ZSET, wf_res HASH
--   (a job at the head whose expiry has passed ends "expired" instead: _expire.lua),
--   ohold HASH, oaside ZSET, wait ZSET (strict order per key, _order.lua: a job whose
--   ordering key is held by another live job is set aside, out of ready, into wait and
--   oaside; a key whose holder ended gets its next job back first, ORDER_KEYS keys
--   looked at per call; ORDER_SWEEP random keys of ohold whose holder ended and that
--   have nothing set aside are removed per call), okeyed ZSET (the index of keyed jobs
--   not yet claimed, "key\0id": a job's entry goes when it is leased or expires here;
--   ORDER_SWEEP random entries whose job is no longer waiting are removed per call)
-- ARGV[1] batch (1..100)
-- ARGV[2] the queue's policy, read by name (_policy.lua): visibility_ms (its default
--   lease), concurrency (0 = unlimited), qps (0 = unlimited), promote_limit, mode, aging_us
-- ARGV[3] consumer id (free text, shown to operators)
-- Raises ZQ_BAD_ARGUMENT (nothing written) for arguments out of bounds, or a policy that
--   is not one.
-- Returns: {hint_ms, then 9 per job: id, body, attempt, token, priority, max_retries,
--   enqueued_at_ms, lease deadline ms, its own lease ms (0: the queue's)}: the fields a
--   worker runs a job with, as integers (no record to decode on the worker's side)
--   hint_ms when nothing was claimed: ms until the next delayed job is due or the rate
--   limit admits a start; -1 = nothing known (wait for a notify); 0 otherwise (also
--   when only corrupt records or expired jobs were met: claim again); at most
--   ORDER_POLL_MS while jobs are set aside behind their key (no script says when the
--   key's holder ends: the next claim looks).
-- Expired and corrupt jobs at the head are read past: up to EXPIRED_MAX (_expire.lua) of
--   them per call end (expired, or in dead letters) and the jobs behind them are leased
--   in the same call; a call that stopped at that bound with nothing leased answers 0.
-- Work: O((batch + promote_limit + EXPIRED_MAX) log N); the claimed jobs take a constant
--   number of Redis commands (multi-key HMGET, HSET, ZADD), the promoted ones 3 each;
--   the head is read in pages (ZRANGE, HMGET), a next page only after one that held an
--   expired or corrupt job, each of at most EXPIRED_PAGE entries beyond the batch.
--   Jobs set aside behind their key count as read past (EXPIRED_MAX); plus
--   order_release's work for ORDER_KEYS keys when any job is set aside.

--@include now_ms
--@include bounds
--@include decode_meta
--@include promote
--@include bury_corrupt
--@include fmt
--@include expire
--@include count
--@include guard
--@include record
--@include policy
--@include keys
--@include order

local k = key_roles(KEYS, {'ready', 'delayed', 'leased', 'body', 'meta', 'ctr', 'rate', 'stats',
  'dead', 'errors', 'paused', 'expiry', 'expired', 'wf_out', 'wf_res', 'ohold', 'oaside', 'wait',
  'okeyed'})
local ORDER_KEYS, ORDER_POLL_MS, ORDER_SWEEP = 8, 100, 2

-- The key checks (_guard.lua) are made only where a write could meet a key of the wrong
-- type: all the keys, once, before promoting due jobs or ending a corrupt record or an
-- expired job; on the common path (every record read is claimed) only `leased`, and
-- `ctr` by its first write (HINCRBY tok, counter_reply): the other keys it writes
-- (ready, meta, rate) were read before it, and a read of the wrong type fails first.
local guarded = false
local function guard_all()
  if not guarded then
    guard_keys(KEYS)
    guarded = true
  end
end

local rate = k.rate
local policy = read_policy(ARGV[2])
local batch, vt = tonumber(ARGV[1]), policy.visibility_ms
local concurrency, qps, most = policy.concurrency, policy.qps, policy.promote_limit
local mode, aging_us, consumer = policy.mode, policy.aging_us, ARGV[3]
if not is_int(batch, 1, 100) or not is_int(vt, MIN_LEASE_MS, MAX_LEASE_MS)
  or not is_int(concurrency, 0, MAX_EXACT) or not (qps and qps >= 0 and qps < MAX_EXACT)
  or not is_int(most, 0, 5000) then
  error('ZQ_BAD_ARGUMENT: claim needs batch 1..100, visibility_ms ' .. MIN_LEASE_MS .. '..' ..
    MAX_LEASE_MS .. ', concurrency >= 0, qps >= 0, promote_limit 0..5000')
end

if redis.call('EXISTS', k.paused) == 1 then
  return {-1}
end

local now = now_ms()
promote(k, now, most, mode, aging_us, guard_all)
local ordered = false
if redis.call('EXISTS', k.ohold, k.oaside, k.okeyed) > 0 then -- (one command on the common path)
  guard_all()
  ordered = order_release(k, ORDER_KEYS)
  order_sweep(k, ORDER_SWEEP)
end

local n = batch
local hint = -1
if concurrency > 0 then
  local room = concurrency - redis.call('ZCARD', k.leased)
  if room < n then
    n = room
  end
end
local tokens, last
if qps > 0 and n > 0 then
  local state = redis.call('HMGET', rate, 'tokens', 'ts')
  local burst = math.max(qps, 1)
  tokens = tonumber(state[1]) or burst
  last = tonumber(state[2]) or now
  if now > last then
    tokens = math.min(burst, tokens + (now - last) * qps / 1000)
  end
  local whole = math.floor(tokens)
  if whole < n then
    n = whole
    if n <= 0 then
      hint = math.ceil((1 - tokens) * 1000 / qps)
    end
  end
end

local out = {0}
if n > 0 then
  -- read first, check every record, then write: a bad record must not strand the batch.
  -- Expired and corrupt heads are read past, EXPIRED_MAX of them at most per call, so
  -- that a ready job behind them is leased by this very call.
  local got, bad, lapsed, good, done = 0, {}, {}, {}, {}
  local aside, holders, held = {}, {}, {} -- strict order per key (_order.lua)
  local want, offset = n, 0
  while want > 0 do
    local page = redis.call('ZRANGE', k.ready, offset, offset + want - 1, 'WITHSCORES')
    local seen = #page / 2
    if seen == 0 then
      break
    end
    local ids = {}
    for i = 1, seen do
      ids[i] = page[2 * i - 1]
    end
    local metas = redis.call('HMGET', k.meta, unpack(ids))
    local ms, whys = {}, {}
    for i = 1, seen do
      ms[i], whys[i] = decode_meta(metas[i])
    end
    local bodies = record_bodies(k.body, ids, ms, seen)
    for i, id in ipairs(ids) do
      if #good >= n then
        break -- (a later page may hold more than the batch needs: the rest stays)
      end
      local m, why = ms[i], whys[i]
      if m and not bodies[i] then
        m, why = nil, 'body missing'
      end
      if m and is_lapsed(m, now) then
        lapsed[#lapsed + 1] = {id, m}
      elseif m and m.o and not order_free(k, id, m, held) then
        aside[#aside + 1] = {id, m.o, page[2 * i]}
      elseif m then
        if m.o then
          holders[#holders + 1] = {holder_of(id, m), m.o, id}
        end
        good[#good + 1] = {id, m, bodies[i], page[2 * i], metas[i]}
      else
        bad[#bad + 1] = {id, why, metas[i]}
      end
      done[#done + 1] = id
    end
    offset = offset + seen
    local skipped = #bad + #lapsed + #aside
    if seen < want or #good >= n or skipped == 0 or skipped >= EXPIRED_MAX then
      break
    end
    want = math.min(EXPIRED_MAX - skipped, math.max(n - #good, EXPIRED_PAGE))
  end
  if #done > 0 then
    got = #good
    local common = got > 0 and #bad == 0 and #lapsed == 0 and #aside == 0 and #holders == 0
    for _, g in ipairs(good) do
      common = common and not g[2].x
    end
    local first
    if common and not guarded then
      guard_keys({k.leased})
      first = counter_reply(redis.pcall('HINCRBY', k.ctr, 'tok', got), k.ctr, 'tok')
    else
      guard_all()
    end
    redis.call('ZREM', k.ready, unpack(done))
    if got > 0 then
      first = (first or redis.call('HINCRBY', k.ctr, 'tok', got)) - got + 1
      local new_meta, lease, started = {}, {}, {}
      local call = {c = consumer, st = now} -- the lease fields its jobs share (lease_value)
      for i, g in ipairs(good) do
        local id, m, raw = g[1], g[2], g[5]
        if m.x then -- started in time: its expiry no longer applies (nor to its retries)
          started[#started + 1] = id
          m.x, raw = nil, false -- (the stored record no longer says it)
        end
        local attempt, token = (m.a or 0) + 1, first + i - 1
        -- its place in line (q) is kept for release(); ack_many reads its token unpacked
        local stored = lease_value(raw, m, token, attempt, g[4], call)
        local deadline = now + (m.v or vt)
        new_meta[#new_meta + 1] = id
        new_meta[#new_meta + 1] = stored
        lease[#lease + 1] = fmt(deadline) -- (a number would be written by %.14g)
        lease[#lease + 1] = id
        local o = #out -- the job's nine entries of the reply (Returns, above)
        out[o + 1], out[o + 2], out[o + 3], out[o + 4] = id, g[3], attempt, token
        out[o + 5], out[o + 6], out[o + 7] = m.p or 0, m.m or 0, m.e or 0
        out[o + 8], out[o + 9] = deadline, m.v or 0
      end
      redis.call('HSET', k.meta, unpack(new_meta))
      redis.call('ZADD', k.leased, unpack(lease))
      if #started > 0 then
        redis.call('ZREM', k.expiry, unpack(started))
      end
    end
    bury_corrupt(k, bad, now, nil)
    expire_jobs(k, lapsed, now)
    order_unindex(k, lapsed)
    order_aside(k, aside, now)
    order_hold(k, holders)
    ordered = ordered or #aside > 0
  end
  if qps > 0 then
    redis.call('HSET', rate, 'tokens', fmt(tokens - got), 'ts', now)
  end
  if got > 0 then
    count_stat(k.stats, 'claimed', got)
    return out
  end
  if #bad > 0 or #lapsed > 0 or #aside > 0 then
    return out -- hint 0: the corrupt, expired or set-aside jobs are out of the way, claim again
  end
end
if hint < 0 then
  local first = redis.call('ZRANGE', k.delayed, 0, 0, 'WITHSCORES')
  if first[2] then
    hint = math.max(0, tonumber(first[2]) - now)
  end
end
if ordered and (hint < 0 or hint > ORDER_POLL_MS) then
  hint = ORDER_POLL_MS
end
out[1] = hint
return out
