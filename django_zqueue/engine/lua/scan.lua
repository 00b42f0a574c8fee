-- scan.lua: one bounded step of housekeeping: promote due delayed jobs, recover expired
-- leases (retry, or dead letters when attempts are spent), trim dead letters by age and
-- count. Safe to run from any number of processes at once. A due or expired job whose
-- record cannot be used goes to dead letters on its own ('corrupt record: ...', counted
-- in `buried`); the other jobs of the step move as usual.
--
-- KEYS by role (_keys.lua, engine/keys.py SCRIPT_ROLES; ZQ_BAD_ARGUMENT, nothing
--   written, when a key is not its role's), in this order:
-- ready  ZSET  delayed ZSET  leased ZSET  dead ZSET
-- body   HASH  meta    HASH  errors HASH  progress HASH
-- ctr    HASH  stats  HASH  notify LIST
-- wait  ZSET  wf_out ZSET  wf_res HASH (a workflow job buried
--   here leaves an outbox entry, see _wf_mark.lua)
-- expiry ZSET  expired ZSET (jobs whose expiry passed before they
--   started end "expired": _expire.lua; expired jobs are trimmed as dead letters are)
-- finished ZSET  cancels ZSET  history HASH (the history of
--   finished jobs, _history.lua: trimmed here too, so an idle queue's history still ages
--   out, and a history switched off empties)
-- logs HASH (the queue's job logs, engine/joblogs.py: dropped with their history
--   entries; and, a bounded HSCAN step per call from the cursor in ctr `lcur`, the logs
--   of jobs with neither a record nor a history entry: acked without a history, dead or
--   expired ones trimmed, deleted. Soft: a key of another type is left as it is)
-- ARGV[1] limit (jobs per step and kind, 1..5000)
-- ARGV[2] the queue's policy, read by name (_policy.lua): mode, aging_us, dead_max,
--   dead_ttl_ms, notify_cap, keep_finished (0: none kept), finished_ttl_ms
-- Raises ZQ_BAD_ARGUMENT (nothing written) for arguments out of bounds, or a policy that
--   is not one.
-- Returns: {promoted, recovered, buried, trimmed, more, expired}; more = 1 when a step hit
--   `limit` (call again), else 0; expired: jobs that ended "expired" in this step;
--   trimmed: dead letters, expired jobs and history entries removed by age or count.
-- Work: O(limit log N) per kind, in a constant number of Redis commands per kind.

--@include now_ms
--@include bounds
--@include promote
--@include decode_meta
--@include bury_corrupt
--@include ready_scores
--@include tick_us
--@include fmt
--@include series
--@include notify
--@include trim_dead
--@include wf_mark
--@include expire
--@include count
--@include guard
--@include record
--@include attempts
--@include history
--@include policy
--@include keys

local k = key_roles(KEYS, {'ready', 'delayed', 'leased', 'dead', 'body', 'meta', 'errors',
  'progress', 'ctr', 'stats', 'notify', 'wait', 'wf_out', 'wf_res', 'expiry', 'expired',
  'finished', 'cancels', 'history', 'logs'})

guard_keys(KEYS)

local policy = read_policy(ARGV[2])
local limit, mode, aging_us = tonumber(ARGV[1]), policy.mode, policy.aging_us
local dead_max, dead_ttl, cap = policy.dead_max, policy.dead_ttl_ms, policy.notify_cap
if not is_int(limit, 1, 5000) or not is_int(dead_max, 0, MAX_EXACT) or not is_int(dead_ttl, 0, MAX_EXACT)
  or not is_int(cap, 1, 100000) or not (mode == 'aging' or mode == 'strict' or mode == 'tstrict' or mode == 'fair') then
  error('ZQ_BAD_ARGUMENT: scan needs limit 1..5000, dead_max, dead_ttl_ms >= 0, notify_cap >= 1, a mode')
end
local keep, keep_ttl = policy.keep_finished, policy.finished_ttl_ms
if not (is_int(keep, 0, MAX_EXACT) and is_int(keep_ttl, 1, MAX_EXACT)) then
  error('ZQ_BAD_ARGUMENT: scan needs keep_finished >= 0 and finished_ttl_ms >= 1')
end
local now = now_ms()

-- Jobs whose expiry passed while they waited (ready, delayed or for their parents): they
-- end "expired"; an index entry of a job that started or ended meanwhile is dropped.
local lapsing = redis.call('ZRANGEBYSCORE', k.expiry, '-inf', now, 'LIMIT', 0, limit)
local lapsed = 0
if #lapsing > 0 then
  local raws = redis.call('HMGET', k.meta, unpack(lapsing))
  local ends, stale, out_of = {}, {}, {}
  for i, id in ipairs(lapsing) do
    local meta = raws[i] and decode_meta(raws[i])
    local where = nil
    if meta and is_lapsed(meta, now) then
      for _, set in ipairs({k.ready, k.delayed, k.wait}) do
        if redis.call('ZSCORE', set, id) then
          where = set
          break
        end
      end
    end
    if where then
      ends[#ends + 1] = {id, meta}
      out_of[#out_of + 1] = {where, id}
    else
      stale[#stale + 1] = id
    end
  end
  for _, w in ipairs(out_of) do
    local where, id = w[1], w[2]
    redis.call('ZREM', where, id)
  end
  if #stale > 0 then
    redis.call('ZREM', k.expiry, unpack(stale))
  end
  lapsed = expire_jobs(k, ends, now)
end

local promoted, corrupt = promote(k, now, limit, mode, aging_us)
notify(k.notify, promoted, cap)

-- Expired leases, in a constant number of commands for the whole step: each goes back
-- in line (as nack.lua with no delay) or, with its attempts spent, to dead letters.
local expired = redis.call('ZRANGEBYSCORE', k.leased, '-inf', '(' .. fmt(now), 'LIMIT', 0, limit)
if #expired < limit then -- a deadline of +inf (a corrupt lease) never comes: expired too
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', k.leased, '+inf', '+inf', 'LIMIT', 0,
    limit - #expired)) do
    expired[#expired + 1] = id
  end
end
local recovered, buried = 0, 0 -- corrupt: buried for an unusable record (promote, below)
if #expired > 0 then
  local raws = redis.call('HMGET', k.meta, unpack(expired))
  local errors, metas, again, dead, ids, bad, flows = {}, {}, {}, {}, {}, {}, {}
  for i, id in ipairs(expired) do
    local meta, why = decode_meta(raws[i])
    if not meta then
      bad[#bad + 1] = {id, why, raws[i]}
    else
      ids[#ids + 1] = id
      local total = (meta.m or 0) + 1
      errors[#errors + 1] = {id, 'lease expired (consumer ' .. tostring(meta.c or '?') ..
        ', attempt ' .. tostring(meta.a or 0) .. ' of ' .. tostring(total) .. ')', meta.a, meta.c}
      meta.t = nil
      meta.c = nil
      meta.q = nil
      metas[#metas + 1] = id
      metas[#metas + 1] = (encode_record(meta))
      if (meta.a or 0) > (meta.m or 0) then
        dead[#dead + 1] = id
        if meta.k or meta.n then
          flows[#flows + 1] = {id, meta}
        end
      else
        again[#again + 1] = {id, meta}
      end
    end
  end
  recovered, buried = #again, #dead
  local scored = nil
  if recovered > 0 then
    scored = ready_scores(k.ctr, again, mode, aging_us) -- may raise: before any write
  end
  redis.call('ZREM', k.leased, unpack(expired))
  count_stat(k.stats, 'expired', #expired)
  if #ids > 0 then
    soft('HDEL', k.progress, unpack(ids))
    add_attempts(k.errors, now, errors)
    redis.call('HSET', k.meta, unpack(metas))
  end
  corrupt = corrupt + bury_corrupt(k, bad, now, nil)
  if scored then
    redis.call('ZADD', k.ready, unpack(scored))
    count_stat(k.stats, 'retried', recovered)
  end
  if buried > 0 then
    -- time of death in ms with a µs fraction from the monotonic clock, as nack.lua
    local us = tick_us(k.ctr, 'dclock')
    if buried > 1 then
      redis.call('HSET', k.ctr, 'dclock', fmt(us + buried - 1))
    end
    local scored = {}
    for i, id in ipairs(dead) do
      scored[#scored + 1] = fmt((us + i - 1) / 1000)
      scored[#scored + 1] = id
    end
    redis.call('ZADD', k.dead, unpack(scored))
    count_stat(k.stats, 'dead', buried)
    bump(k.stats, 'd', buried, now)
    for _, f in ipairs(flows) do
      wf_mark(k.wf_out, k.wf_res, f[1], f[2], false, nil, now)
    end
  end
  -- a retried job waits in line; a buried one frees a slot under a concurrency limit
  notify(k.notify, #expired, cap)
end

sample_depth(k.stats, k.ready, now)
take_pending(k.stats, now)

local trimmed, more_dead = trim_dead(k.dead, k.body, k.meta, k.errors, k.progress, now,
  dead_max, dead_ttl, limit)
local trimmed_x, more_x = trim_dead(k.expired, k.body, k.meta, k.errors, k.progress, now,
  dead_max, dead_ttl, limit)
-- the history of finished jobs: succeeded, then cancelled ones, `limit` each
local trimmed_h, more_h = 0, false
if keep and k.history then
  local n1, m1 = trim_history(k.finished, k.history, now, keep, keep_ttl, limit, k.logs)
  local n2, m2 = trim_history(k.cancels, k.history, now, keep, keep_ttl, limit, k.logs)
  trimmed_h, more_h = n1 + n2, m1 or m2
end
if k.logs then -- one step of the sweep of logs whose job is gone
  local cursor = redis.call('HGET', k.ctr, 'lcur') or '0'
  local page = redis.pcall('HSCAN', k.logs, cursor, 'COUNT', limit)
  if type(page) == 'table' and not page.err then
    local gone, fields = {}, page[2]
    for i = 1, #fields, 2 do
      local id = fields[i]
      if redis.call('HEXISTS', k.meta, id) == 0
        and not (k.history and soft_value(redis.pcall('HEXISTS', k.history, id)) == 1) then
        gone[#gone + 1] = id
      end
    end
    if #gone > 0 then
      redis.call('HDEL', k.logs, unpack(gone))
    end
    if page[1] ~= cursor then
      redis.call('HSET', k.ctr, 'lcur', page[1])
    end
  end
end
local more = 0
if promoted == limit or #expired == limit or more_dead or more_x or more_h or #lapsing == limit then
  more = 1
end
return {promoted, recovered, buried + corrupt, trimmed + trimmed_x + trimmed_h, more, lapsed}
