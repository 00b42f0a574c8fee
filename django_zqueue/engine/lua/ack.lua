-- ack.lua: finish a delivery: the job and its record are removed; optionally its result
-- is kept under its own key with a TTL, and, when the queue keeps a history of finished
-- jobs, a small record of it in the history (_history.lua).
--
-- KEYS by role (_keys.lua, engine/keys.py SCRIPT_ROLES), in this order: leased ZSET, body
--   HASH, meta HASH, errors HASH, progress HASH, stats HASH, notify LIST, wf_out ZSET,
--   wf_res HASH (the workflow outbox, see _wf_mark.lua); then this job's keys: KEYS[10]
--   result STRING (written only when ARGV[4] is not ''), KEYS[11] unique STRING (this
--   tag's reservation: written for `u` ms when the record has `u`, set by
--   publish_once.lua for unique_for; at most 3650 days), KEYS[12] steps HASH (its durable
--   step records: deleted when the record has `d`); then, passed only when the policy's
--   keep_finished > 0, the history of finished jobs by role: KEYS[13] finished ZSET,
--   KEYS[14] cancels ZSET, KEYS[15] history HASH (an optional write: with one of its three keys of another type the job
--   is acked all the same, without its history, and that key is left as it was),
--   KEYS[16] logs HASH (optional: the logs of the jobs the history's bound drops go too)
-- ARGV[1] id   ARGV[2] token (from the claim)   ARGV[3] the queue's policy, read by name
--   (_policy.lua): ack_notify (the notify cap on ack: 0 = don't notify; set when the
--   queue has a concurrency limit, so a consumer waiting for room wakes), keep_finished
--   (0: keep no history, and touch none of its keys), trim_limit (history entries
--   removed at most per call, besides this job's own room; the bound by count,
--   _history.lua's bound_history: the age bound is scan's)
-- ARGV[4] result JSON ('' = keep none)   ARGV[5] result TTL ms   ARGV[6] run time ms
--   ('' = not measured; else added to stats run_ms)
-- ARGV[7] the result passed to dependents, JSON ('' = null; used only when the job is
--   part of a workflow)
-- Raises ZQ_BAD_ARGUMENT (nothing written) for a policy that is not one (_policy.lua), or
--   KEYS short of a role.
-- Returns: 1 acked; 2 acked, and its end is in the workflow outbox to dispatch; 0 stale
--   (the job is not leased under this token: its lease was recovered or it was handed to another consumer), or a record that does not decode
--   to an object holding this token (the scanner moves it to dead letters when its lease
--   runs out): nothing changed. Only the token is read: the record is deleted.
-- Work: O(log N), and O((1 + limit) log N) with a history (whose two indexes are read,
--   ZCARD, instead of checked: a wrong type fails before any write; an empty cancels
--   index is not written).

--@include bounds
--@include drop_record
--@include now_ms
--@include series
--@include notify
--@include wf_mark
--@include count
--@include guard
--@include record
--@include history
--@include policy
--@include keys

local k = key_roles(KEYS, {'leased', 'body', 'meta', 'errors', 'progress', 'stats', 'notify',
  'wf_out', 'wf_res'})
local result_key, unique_key, steps_key = KEYS[10], KEYS[11], KEYS[12]
if not steps_key then
  error('ZQ_BAD_ARGUMENT: ack takes its 9 roles, then the job\'s result, unique and steps keys')
end
local policy = read_policy(ARGV[3])
local keep = policy.keep_finished
-- the history's keys, by role, when passed
local h = keep > 0 and KEYS[13] and key_roles({KEYS[13], KEYS[14], KEYS[15]},
  {'finished', 'cancels', 'history'})
local history = h and true or false
-- with a history, its two indexes are read (their sizes) instead of checked: a wrong
-- type of either skips the history (_history.lua's index_sizes); its HASH is the
-- first key written (keep_ended's HSET, below, soft): a wrong type skips the history,
-- nothing of it written; the other keys are checked (_guard.lua)
local finished_size, cancels_empty = 0, false
if history then
  finished_size, cancels_empty = index_sizes(h.finished, h.cancels)
  history = finished_size ~= nil
end
guard_keys({k.leased, k.body, k.meta, k.errors, k.progress, k.stats, k.notify, k.wf_out,
  k.wf_res, result_key, unique_key, steps_key})

local id, token, cap = ARGV[1], tonumber(ARGV[2]), policy.ack_notify
local raw = redis.call('HGET', k.meta, id)
local meta = parse_record(raw, true)
if not meta or meta.t ~= token or not redis.call('ZSCORE', k.leased, id) then
  return 0
end
-- the reservation's TTL is read before any write: a corrupt `u` (out of SET's range)
-- must not fail the call halfway, with the job out of leased and its record left
local unique = nil
if type(meta.u) == 'number' and meta.u >= 1 then
  unique = math.min(math.floor(meta.u), MAX_DELAY_MS)
end
local clock = redis.call('TIME')
local now = ms_of(clock)
if history then -- its record, kept in the history (before it goes): the first write
  local errors = soft_value(redis.pcall('HGET', k.errors, id)) -- kept with its end
  local head = with_errors(ended_head(now, tonumber(ARGV[6]), {}), errors)
  local kept = kept_record(raw, head, k.body, id)
  local added = keep_ended(h.finished, h.cancels, h.history, {id}, {id, kept}, clock,
    cancels_empty, true)
  if added then
    bound_history(h.finished, h.history, keep, 1, policy.trim_limit, finished_size + added,
      KEYS[16])
  end
end
redis.call('ZREM', k.leased, id)
if unique then
  redis.call('SET', unique_key, '1', 'PX', unique)
end
drop_record(k.body, k.meta, k.errors, k.progress, id)
if meta.d then
  redis.call('DEL', steps_key)
end
count_stat(k.stats, 'acked', 1)
bump(k.stats, 'a', 1, now)
if ARGV[6] ~= '' then
  count_stat(k.stats, 'run_ms', ARGV[6])
  bump(k.stats, 't', tonumber(ARGV[6]), now)
end
local recorded = wf_mark(k.wf_out, k.wf_res, id, meta, true, ARGV[7], now)
if ARGV[4] ~= '' then
  redis.call('SET', result_key, ARGV[4], 'PX', ARGV[5])
end
if cap > 0 then
  notify(k.notify, 1, cap)
end
if recorded then
  return 2
end
return 1
