-- fire.lua: fire one tick of a periodic schedule, exactly once: compare-and-set on the
-- schedule's next tick, enqueue the tick's job (its tag is derived from schedule name and
-- tick, so even a repeated call cannot add a second one), and move the schedule on.
-- Any number of scanners may call it for the same tick; one wins.
--
-- KEYS by role (_keys.lua, engine/keys.py SCRIPT_ROLES; ZQ_BAD_ARGUMENT, nothing written,
--   when a key is not its role's): ready ZSET, delayed ZSET, body HASH, meta HASH,
--   ctr HASH, notify LIST, stats HASH, dead ZSET, leased ZSET, sched ZSET (schedule name
--   -> next tick, ms), sched_last HASH (schedule name -> "tick_ms job_tag" of its last
--   firing), expiry ZSET (the job's expiry, if it has one), expired ZSET, sched_defs HASH
--   (schedule name -> JSON definition with its digest)
-- ARGV[1] name   ARGV[2] expected tick (the score the caller read)
-- ARGV[3] next tick ('' = take the schedule out of the due set)
-- ARGV[4] fire (1 = enqueue the job; 0 = only move on: a tick skipped by catch-up policy)
-- ARGV[5] the queue's policy, read by name (_policy.lua): mode, aging_us, notify_cap
-- ARGV[6] the job, one MessagePack map as in publish.lua ('' with fire 0)
-- ARGV[7] the digest of the definition the caller computed the job and next tick from
--         ('' = not checked): a definition changed since (an operator's edit) means the
--         call is stale, and it does nothing
-- Raises ZQ_BAD_ARGUMENT (nothing written) when the job's arguments are out of bounds, or the
--   policy is not one.
-- Returns: 1 fired (or moved on); 0 the tick was already handled (nothing changed).
-- Work: O(log N).

--@include now_ms
--@include new_job
--@include tag_state
--@include series
--@include notify
--@include count
--@include guard
--@include policy
--@include keys

local k = key_roles(KEYS, {'ready', 'delayed', 'body', 'meta', 'ctr', 'notify', 'stats', 'dead',
  'leased', 'sched', 'sched_last', 'expiry', 'expired', 'sched_defs'})
guard_keys(KEYS)

local name, expected, policy = ARGV[1], ARGV[2], read_policy(ARGV[5])
local now = now_ms()
local j, meta, run_at, why = nil, nil, nil, nil
if ARGV[4] == '1' then
  j, why = job_spec(ARGV[6])
  if j then
    meta, run_at, why = read_job(j, now)
  end
  if why then
    error('ZQ_BAD_ARGUMENT: ' .. why)
  end
end
local current = redis.call('ZSCORE', k.sched, name)
if not current or tonumber(current) ~= tonumber(expected) then
  return 0
end
if ARGV[7] and ARGV[7] ~= '' then
  local ok, def = pcall(cjson.decode, redis.call('HGET', k.sched_defs, name) or '')
  if not ok or type(def) ~= 'table' or def['digest'] ~= ARGV[7] then
    return 0
  end
end
if ARGV[4] == '1' then
  local id = j.id
  if not tag_state(k, id) then
    -- may raise: before its writes
    add_job(k, id, j.body, meta, run_at, now, policy.mode, policy.aging_us)
    count_stat(k.stats, 'enqueued', 1)
    bump(k.stats, 'e', 1, now, k.ready) -- a minute begun here: its depth
    notify(k.notify, 1, policy.notify_cap)
  end
  redis.call('HSET', k.sched_last, name, expected .. ' ' .. id)
end
if ARGV[3] == '' then
  redis.call('ZREM', k.sched, name)
else
  redis.call('ZADD', k.sched, ARGV[3], name)
end
return 1
