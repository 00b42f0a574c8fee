-- claim_fair.lua: the claim of a queue with fairness = 'groups' (docs/fairness.md). As
-- claim.lua: promote due delayed jobs, then lease up to `batch` jobs from the head of
-- ready within the queue's global limits (corrupt records go to dead letters alone). And:
-- within each group's limits (group_concurrency jobs in flight, group_qps starts per
-- second): a job at the head whose group is at its limit is set aside (it waits in
-- delayed, indexed by group in gpark) and comes back to ready with its own score once
-- its group has room; then the virtual time moves on, drained groups are forgotten and
-- starts are counted per group (fair_claimed).
--
-- KEYS by role (_keys.lua, engine/keys.py SCRIPT_ROLES; ZQ_BAD_ARGUMENT, nothing
--   written, when a key is not its role's), in this order:
-- ready   ZSET   delayed ZSET   leased ZSET   body HASH
-- meta    HASH   ctr     HASH   rate   HASH   stats HASH
-- dead    ZSET   errors HASH   gstarts HASH
-- gstarts_prev HASH   ginflight ZSET   grate HASH
-- gpark ZSET          gwait ZSET   (see _group_limits.lua)
-- paused STRING (present: the queue is paused, nothing is claimed nor promoted
--   and the hint is -1)
-- expiry ZSET   expired ZSET   wf_out ZSET   wf_res HASH
--   (a job at the head whose expiry has passed ends "expired" instead: _expire.lua)
-- gjobs ZSET (group_max_length's index, _group_room.lua: swept when the
--   policy's group_max_length > 0, else not touched)
-- ARGV[1] batch (1..100)
-- ARGV[2] the queue's policy, read by name (_policy.lua): visibility_ms (its default
--   lease), concurrency (0 = unlimited), qps (0 = unlimited), promote_limit,
--   group_concurrency (0 = unlimited, else 1..1000), group_qps (0 = unlimited),
--   group_max_length (0 = none; above 0: its index is swept)
-- ARGV[3] consumer id
-- Raises ZQ_BAD_ARGUMENT (nothing written) for arguments out of bounds, or a policy that
--   is not one.
-- Returns: {hint_ms, then 9 per job: id, body, attempt, ...} as claim.lua; hint 0 also
--   when jobs were only set aside (claim again), else the earliest of the next delayed
--   job and the next look at a waiting group.
-- Expired and corrupt jobs at the head are read past as in claim.lua: up to EXPIRED_MAX
--   (_expire.lua) per call, in pages of at most EXPIRED_PAGE beyond the batch.
-- Work: O((batch + promote_limit + PARK_MAX + EXPIRED_MAX) log N), plus at most
--   VERIFY_BUDGET (2000) in-flight entries checked, UNPARK_GROUPS (4) waiting groups of
--   up to 100 jobs, and 10 entries of each sweep (fair_sweep, limits_sweep, group_sweep;
--   200 when nothing was leased).

--@include now_ms
--@include bounds
--@include decode_meta
--@include promote
--@include bury_corrupt
--@include fmt
--@include expire
--@include fair
--@include group_limits
--@include count
--@include guard
--@include record
--@include group_room
--@include policy
--@include keys

local k = key_roles(KEYS, {'ready', 'delayed', 'leased', 'body', 'meta', 'ctr', 'rate', 'stats',
  'dead', 'errors', 'gstarts', 'gstarts_prev', 'ginflight', 'grate', 'gpark', 'gwait', 'paused',
  'expiry', 'expired', 'wf_out', 'wf_res', 'gjobs'})

guard_keys({unpack(KEYS, 1, 21)})

local rate = k.rate
local policy = read_policy(ARGV[2])
local batch, vt = tonumber(ARGV[1]), policy.visibility_ms
local concurrency, qps, most = policy.concurrency, policy.qps, policy.promote_limit
local consumer, gc, gq = ARGV[3], policy.group_concurrency, policy.group_qps
local gmax = policy.group_max_length
if not is_int(batch, 1, 100) or not is_int(vt, MIN_LEASE_MS, MAX_LEASE_MS)
  or not is_int(concurrency, 0, MAX_EXACT) or not (qps and qps >= 0 and qps < MAX_EXACT)
  or not is_int(most, 0, 5000) or not is_int(gc, 0, MAX_GROUP_CONCURRENCY)
  or not (gq and gq >= 0 and gq <= MAX_GROUP_QPS) or not is_int(gmax, 0, MAX_GROUP_LENGTH) then
  error('ZQ_BAD_ARGUMENT: claim_fair needs batch 1..100, visibility_ms ' .. MIN_LEASE_MS ..
    '..' .. MAX_LEASE_MS .. ', concurrency >= 0, qps >= 0, promote_limit 0..5000, ' ..
    'group_concurrency 0..' .. MAX_GROUP_CONCURRENCY .. ', group_qps 0..' .. MAX_GROUP_QPS ..
    ', group_max_length 0..' .. MAX_GROUP_LENGTH)
end

if gmax > 0 then -- the index is written only by the sweep, after the other writes
  guard_keys({k.gjobs})
end

if redis.call('EXISTS', k.paused) == 1 then
  return {-1}
end

local now = now_ms()
promote(k, now, most, 'fair', 0)
local lim = {c = gc, q = gq, budget = VERIFY_BUDGET, inflight = {}, tat = {}, took = {}}
if gq > 0 then
  lim.T = 1000 / gq
  lim.tau = (math.max(gq, 1) - 1) * lim.T
end
unpark(k, lim, now)

local n = batch
local hint = -1
if concurrency > 0 then
  n = math.min(n, concurrency - redis.call('ZCARD', k.leased))
end
local tokens
if qps > 0 and n > 0 then
  local state = redis.call('HMGET', rate, 'tokens', 'ts')
  local burst = math.max(qps, 1)
  tokens = tonumber(state[1]) or burst
  local last = tonumber(state[2]) or now
  if now > last then
    tokens = math.min(burst, tokens + (now - last) * qps / 1000)
  end
  if math.floor(tokens) < n then
    n = math.floor(tokens)
    if n <= 0 then
      hint = math.ceil((1 - tokens) * 1000 / qps)
    end
  end
end

-- 1. read the head; decide each job in line order: lease, set aside, or corrupt
local out = {0}
local take, parked, bad, done, lapsed = {}, {}, {}, {}, {}
if n > 0 then
  local extra = (gc > 0 or gq > 0) and PARK_MAX or 0 -- room to set jobs aside
  -- expired and corrupt heads are read past (EXPIRED_MAX at most per call): a next page
  -- is read only after one that held some
  local want, offset, stop = n + extra, 0, false
  while want > 0 and not stop do
    local head = redis.call('ZRANGE', k.ready, offset, offset + want - 1, 'WITHSCORES')
    local ids = {}
    for i = 1, #head / 2 do
      ids[i] = head[2 * i - 1]
    end
    local metas = #ids > 0 and redis.call('HMGET', k.meta, unpack(ids)) or {}
    for i, id in ipairs(ids) do
      if #take >= n or #parked >= PARK_MAX then
        stop = true
        break
      end
      local m, why = decode_meta(metas[i])
      if not m then
        bad[#bad + 1] = {id, why, metas[i]}
      elseif is_lapsed(m, now) then
        lapsed[#lapsed + 1] = {id, m}
      else
        local group = m.g or ''
        local ok, wake = group_admits(k, lim, group, now)
        if ok == nil then
          stop = true
          break -- check budget spent: the rest waits for the next call
        elseif ok then
          group_took(k, lim, group, now)
          take[#take + 1] = {id, m, nil, head[2 * i], metas[i]}
        else
          parked[#parked + 1] = {id, group, head[2 * i], wake, m}
        end
      end
      done[#done + 1] = id
    end
    offset = offset + #ids
    local skipped = #bad + #lapsed
    if #ids < want or #take >= n or skipped == 0 or skipped >= EXPIRED_MAX then
      break
    end
    want = math.min(EXPIRED_MAX - skipped, math.max(n - #take, EXPIRED_PAGE))
  end
end

-- 2. write: bodies checked, leases, set-aside jobs, counters
local good = {}
if #take > 0 then
  local tids = {}
  for i, t in ipairs(take) do
    tids[i] = t[1]
  end
  local tms = {}
  for i, t in ipairs(take) do
    tms[i] = t[2]
  end
  local bodies = record_bodies(k.body, tids, tms, #take)
  for i, t in ipairs(take) do
    if bodies[i] then
      t[3] = bodies[i]
      good[#good + 1] = t
    else
      bad[#bad + 1] = {t[1], 'body missing', cjson.encode(t[2])}
    end
  end
end
if #done > 0 then
  redis.call('ZREM', k.ready, unpack(done))
end
if #good > 0 then
  local first = redis.call('HINCRBY', k.ctr, 'tok', #good) - #good + 1
  local new_meta, lease, inflight, started = {}, {}, {}, {}
  local call = {c = consumer, st = now} -- the lease fields its jobs share (lease_value)
  for i, g in ipairs(good) do
    local id, m, raw = g[1], g[2], g[5]
    if m.x then -- started in time: its expiry no longer applies (nor to its retries)
      started[#started + 1] = id
      m.x, raw = nil, false -- (the stored record no longer says it)
    end
    if m.ps ~= nil then -- its score while it was set aside (below)
      m.ps, raw = nil, false
    end
    local attempt, token = (m.a or 0) + 1, first + i - 1
    -- ack_many reads its token unpacked
    local stored = lease_value(raw, m, token, attempt, g[4], call)
    local deadline = now + (m.v or vt)
    new_meta[#new_meta + 1] = id
    new_meta[#new_meta + 1] = stored
    lease[#lease + 1] = fmt(deadline) -- (a number would be written by %.14g)
    lease[#lease + 1] = id
    inflight[#inflight + 1] = 0
    inflight[#inflight + 1] = (m.g or '') .. '\0' .. token .. '\0' .. id
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
  if gc > 0 then
    redis.call('ZADD', k.ginflight, unpack(inflight))
  end
  fair_claimed(k, good, now)
else
  fair_starts(k, {}, now) -- the start counts of an idle queue rotate out too
end
if #parked > 0 then
  -- each record keeps the score it is set aside with (`ps`), so that set_priority can
  -- move its gpark entry (it comes back to ready at that score)
  local marked = {}
  for _, p in ipairs(parked) do
    p[5].ps = p[3]
    marked[#marked + 1] = p[1]
    marked[#marked + 1] = (encode_record(p[5]))
  end
  redis.call('HSET', k.meta, unpack(marked))
  park(k, parked, now)
end
if gq > 0 and #take > 0 then
  local set = {}
  for group in pairs(lim.took) do
    set[#set + 1] = group
    set[#set + 1] = fmt(lim.tat[group])
  end
  redis.call('HSET', k.grate, unpack(set))
end
bury_corrupt(k, bad, now, nil)
expire_jobs(k, lapsed, now)
-- the sweeps: a few entries while there is work, more when the call leased nothing
local sweep = #good > 0 and SWEEP_BUSY or SWEEP_IDLE
limits_sweep(k, lim, now, sweep)
fair_sweep(k, sweep)
if gmax > 0 then
  group_sweep(k, sweep)
end
if qps > 0 and n > 0 then
  redis.call('HSET', rate, 'tokens', fmt(tokens - #good), 'ts', now)
end
if #good > 0 then
  count_stat(k.stats, 'claimed', #good)
  return out
end
if #bad > 0 or #parked > 0 or #lapsed > 0 then
  return out -- hint 0: the head changed, claim again
end
if hint < 0 then
  local first = redis.call('ZRANGE', k.delayed, 0, 0, 'WITHSCORES')
  local wait = redis.call('ZRANGE', k.gwait, 0, 0, 'WITHSCORES')
  for _, at in ipairs({first[2] or false, wait[2] or false}) do
    if at then
      local ms = math.max(0, tonumber(at) - now)
      if hint < 0 or ms < hint then
        hint = ms
      end
    end
  end
end
out[1] = hint
return out
