-- ack.lua: finish a delivery: the job and its record are removed; optionally its result
-- is kept under its own key with a TTL, and, when the queue keeps a history of finished
-- jobs, a small record of it in the history (_history.lua).
--
-- KEYS[1] leased ZSET   KEYS[2] body HASH   KEYS[3] meta HASH   KEYS[4] errors HASH
-- KEYS[5] progress HASH KEYS[6] stats HASH  KEYS[7] notify LIST KEYS[8] result STRING
--   (this job's result key; written only when ARGV[4] is not '')
-- KEYS[9] unique STRING (this tag's reservation: written for `u` ms when the record has
--   `u`, set by publish_once.lua for unique_for; at most 3650 days)
-- ARGV[1] id   ARGV[2] token (from the claim)   ARGV[3] the queue's policy, read by name
--   (_policy.lua): ack_notify (the notify cap on ack: 0 = don't notify; set when the
--   queue has a concurrency limit, so a consumer waiting for room wakes), keep_finished
--   (0: keep no history, and touch none of its keys), trim_limit (history entries
--   removed at most per call, besides this job's own room; the bound by count,
--   _history.lua's bound_history: the age bound is scan's)
-- ARGV[4] result JSON ('' = keep none)   ARGV[5] result TTL ms   ARGV[6] run time ms
--   ('' = not measured; else added to stats run_ms)
-- KEYS[10] wf_out ZSET  KEYS[11] wf_res HASH (the workflow outbox, see _wf_mark.lua)
-- KEYS[12] steps HASH (this job's durable step records: deleted when the record has `d`)
-- ARGV[7] the result passed to dependents, JSON ('' = null; used only when the job is
--   part of a workflow)
-- KEYS[13] finished ZSET  KEYS[14] cancels ZSET  KEYS[15] history HASH (passed only when
--   the policy's keep_finished > 0: the history of finished jobs; the history is an
--   optional write: with one of its three keys of another type the job is acked all the
--   same, without its history, and that key is left as it was)
-- Raises ZQ_BAD_ARGUMENT (nothing written) for a policy that is not one (_policy.lua).
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

local policy = read_policy(ARGV[3])
local keep = policy.keep_finished
local history = keep > 0 and KEYS[15] ~= nil
-- with a history, its two indexes are read (their sizes) instead of checked: a wrong
-- type of either skips the history (_history.lua's index_sizes); its HASH is the
-- first key written (keep_ended's HSET, below, soft): a wrong type skips the history,
-- nothing of it written
local finished_size, cancels_empty = 0, false
local keeps = history
if keeps then
  finished_size, cancels_empty = index_sizes(KEYS[13], KEYS[14])
  history = finished_size ~= nil
  local checked = {}
  for i, key in ipairs(KEYS) do
    if i < 13 then -- the history's keys: read (index_sizes) or first written (keep_ended)
      checked[#checked + 1] = key
    end
  end
  guard_keys(checked)
else
  guard_keys(KEYS)
end

local id, token, cap = ARGV[1], tonumber(ARGV[2]), policy.ack_notify
local raw = redis.call('HGET', KEYS[3], id)
local meta = parse_record(raw, true)
if not meta or meta.t ~= token or not redis.call('ZSCORE', KEYS[1], id) then
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
  local errors = soft_value(redis.pcall('HGET', KEYS[4], id)) -- kept with its end
  local head = with_errors(ended_head(now, tonumber(ARGV[6]), {}), errors)
  local kept = kept_record(raw, head, KEYS[2], id)
  local added = keep_ended(KEYS[13], KEYS[14], KEYS[15], {id}, {id, kept}, clock, cancels_empty,
    true)
  if added then
    bound_history(KEYS[13], KEYS[15], keep, 1, policy.trim_limit, finished_size + added)
  end
end
redis.call('ZREM', KEYS[1], id)
if unique then
  redis.call('SET', KEYS[9], '1', 'PX', unique)
end
drop_record(KEYS[2], KEYS[3], KEYS[4], KEYS[5], id)
if meta.d and KEYS[12] then
  redis.call('DEL', KEYS[12])
end
count_stat(KEYS[6], 'acked', 1)
bump(KEYS[6], 'a', 1, now)
if ARGV[6] ~= '' then
  count_stat(KEYS[6], 'run_ms', ARGV[6])
  bump(KEYS[6], 't', tonumber(ARGV[6]), now)
end
local recorded = wf_mark(KEYS[10], KEYS[11], id, meta, true, ARGV[7], now)
if ARGV[4] ~= '' then
  redis.call('SET', KEYS[8], ARGV[4], 'PX', ARGV[5])
end
if cap > 0 then
  notify(KEYS[7], 1, cap)
end
if recorded then
  return 2
end
return 1
