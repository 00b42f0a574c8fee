-- cancel.lua: cancel a job that waits (ready or delayed) or runs (leased). Its record is
-- deleted and a cancelled record is kept under its own key with a TTL: the terminal
-- state `cancelled`. A running job's lease is taken away at once, so its delivery is
-- stale from now on (no ack, nack or lease recovery can put it back in line); its
-- worker learns of it from its next heartbeat (touch.lua) and stops the run.
--
-- KEYS by role (_keys.lua, engine/keys.py SCRIPT_ROLES; ZQ_BAD_ARGUMENT, nothing
--   written, when a key is not its role's), in this order:
-- ready ZSET   delayed ZSET   leased ZSET   dead ZSET
-- body HASH    meta HASH      errors HASH   progress HASH
-- stats HASH   notify LIST
-- wait ZSET   wf_out ZSET   wf_res HASH (workflows: a job
--   waiting for its parents is cancelled too; a cancelled workflow job leaves an outbox
--   entry, its end a failure for its dependents: _wf_mark.lua)
-- then KEYS[14] cancelled STRING (this job's)
-- KEYS[15] steps HASH (this job's durable step records, deleted)
-- ARGV[1] id   ARGV[2] ttl_ms (how long the cancelled record is kept, 1 ms .. 3650 days)
-- ARGV[3] the queue's policy, read by name (_policy.lua): notify_cap (a running job's
--   slot comes free: one wake-up token), keep_finished (0: keep no history, and touch
--   none of its keys), trim_limit (history entries removed at most per call, besides
--   this job's own room; the bound by count, _history.lua's bound_history: the age bound
--   is scan's)
-- ARGV[4] only (optional: '' any; ready | delayed | leased | waiting: only a job in that
--   state, as a bulk action on one state needs)
-- KEYS[16] finished ZSET  KEYS[17] cancels ZSET  KEYS[18] history HASH (passed only when
--   the policy's keep_finished > 0: the job is kept in the history of finished jobs,
--   _history.lua; taken by role too), KEYS[19] logs HASH (optional: the logs of the jobs
--   the history's bound drops go too)
-- Raises ZQ_BAD_ARGUMENT (nothing written) for a TTL out of bounds or a policy that is
--   not one (_policy.lua).
-- Returns: 1 cancelled while waiting (ready, delayed, or for its parents); 2 cancelled
--   while running; 0 no such job;
--   -1 dead (nothing changed: delete it instead); -2 not in the state `only` names
--   (nothing changed).
-- The cancelled record is JSON {"at": ms, "was": state, "a": attempts, "t": token,
--   "c": consumer} (token and consumer only for a running job).
-- Work: O(log N), and O((1 + limit) log N) with a history.

--@include record
--@include bounds
--@include now_ms
--@include drop_record
--@include notify
--@include wf_mark
--@include count
--@include guard
--@include history
--@include policy
--@include keys

local k = key_roles(KEYS, {'ready', 'delayed', 'leased', 'dead', 'body', 'meta', 'errors',
  'progress', 'stats', 'notify', 'wait', 'wf_out', 'wf_res'})

guard_keys(KEYS)
-- the history's keys, by role, when passed
local h = KEYS[16] and key_roles({KEYS[16], KEYS[17], KEYS[18]},
  {'finished', 'cancels', 'history'})

local policy = read_policy(ARGV[3])
local id, ttl, cap = ARGV[1], tonumber(ARGV[2]), policy.notify_cap
if not is_int(ttl, 1, MAX_DELAY_MS) then
  error('ZQ_BAD_ARGUMENT: ttl_ms must be an integer in [1, ' .. MAX_DELAY_MS .. ']')
end
-- the set of the state `only` names
local in_set = ({ready = k.ready, delayed = k.delayed, leased = k.leased,
  waiting = k.wait})[ARGV[4] or '']
if in_set and not redis.call('ZSCORE', in_set, id) then
  return -2
end
if redis.call('ZSCORE', k.dead, id) then
  return -1
end
local was = nil
for _, s in ipairs({{k.ready, 'ready'}, {k.delayed, 'delayed'}, {k.leased, 'leased'}}) do
  local key, name = s[1], s[2]
  if redis.call('ZREM', key, id) == 1 then
    was = name
    break
  end
end
if not was and redis.call('ZREM', k.wait, id) == 1 then
  was = 'waiting'
end
if not was then
  return 0
end
local rec = {at = now_ms(), was = was}
local raw = redis.call('HGET', k.meta, id)
local meta = parse_record(raw, true)
if meta then
  wf_mark(k.wf_out, k.wf_res, id, meta, false, 'cancelled', rec.at)
  rec.a = tonumber(meta.a) or 0
  if was == 'leased' then
    rec.t = meta.t
    rec.c = meta.c
  end
end
if KEYS[15] then
  redis.call('DEL', KEYS[15]) -- its durable step records
end
local keep = policy.keep_finished
if keep > 0 and h and meta then -- its record, kept in the history (before it goes)
  local errors = soft_value(redis.pcall('HGET', k.errors, id)) -- kept with its end
  local head = with_errors(cmsgpack.pack({fa = rec.at, was = was}), errors)
  local kept = kept_record(raw, head, k.body, id)
  keep_ended(h.cancels, h.finished, h.history, {id}, {id, kept})
  bound_history(h.cancels, h.history, keep, 1, policy.trim_limit, nil, KEYS[19])
end
drop_record(k.body, k.meta, k.errors, k.progress, id)
redis.call('SET', KEYS[14], cjson.encode(rec), 'PX', ttl)
if was == 'leased' then -- a delivery ends: counted apart, so inflight = claimed - ... - cancelled
  count_stat(k.stats, 'cancelled', 1)
  notify(k.notify, 1, cap)
  return 2
end
count_stat(k.stats, 'deleted', 1) -- a waiting job removed, as delete does
return 1
