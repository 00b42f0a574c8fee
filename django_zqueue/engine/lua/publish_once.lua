-- publish_once.lua: add one job under a tag with debounce and/or unique-for rules.
--
-- debounce: while a job with this tag waits (ready or delayed), the call replaces its
--   body, priority and record options and moves its run-at to now + debounce_ms
--   (a ready job goes back to delayed): one job is kept, its enqueue time and attempts
--   too, and its workflow mark `k` (it has dependents: _wf_mark.lua). With no job under the tag, the new job is delayed by debounce_ms.
-- unique_for: the tag must not be reserved (its unique key, written by ack.lua for
--   unique_ms after the job under this tag finished); the job's record keeps `u`
--   (unique_ms) for ack.lua.
-- A tag held by a job in flight or dead, or reserved, is a clash: nothing is written.
--
-- KEYS by role (_keys.lua, engine/keys.py SCRIPT_ROLES; ZQ_BAD_ARGUMENT, nothing written,
--   when a key is not its role's): as publish.lua, ready ZSET, delayed ZSET, body HASH
--   (JSON-layout bodies), meta HASH, ctr HASH, notify LIST, stats HASH, dead ZSET,
--   leased ZSET, wait ZSET, expiry ZSET (the job's expiry, if it has one), expired ZSET,
--   gjobs ZSET (not touched when the policy's group_max_length is 0); then
-- KEYS[14] unique STRING (this tag's reservation)
-- KEYS[15] okeyed ZSET (lex), only when the job has an ordering key (ZQ_BAD_ARGUMENT,
--   nothing written, when it is missing then): its entry "key\0id" (the index of keyed
--   jobs not yet claimed that rank_key.lua reads; claim.lua trims it)
-- ARGV[1] the queue's policy, read by name (_policy.lua): mode, aging_us, notify_cap,
--   max_length and group_max_length (below)
-- ARGV[2] the job, one MessagePack map as in publish.lua, with two more fields:
--   debounce_ms (absent = no debounce; else 1 .. 3650 days; then no delay_ms or
--   run_at_ms) and unique_ms (absent = none; else 1 .. 3650 days)
-- the policy's max_length (as publish.lua; a debounced job replaced in place is not counted)
-- the policy's group_max_length (as publish.lua; a debounced job replaced in place is not
--   counted either, its index entry is added for its group)
-- Raises ZQ_BAD_ARGUMENT (nothing written) for arguments out of bounds; ZQ_QUEUE_FULL
--   (nothing written) for a new job past max_length or its group's group_max_length.
-- Returns: {'new'} written; {'replaced'} a waiting job was debounced;
--   {'clash', state} nothing written (state: leased | dead | waiting | expired | reserved | unknown, or
--   ready | delayed without debounce).
-- Work: O(log N); with group_max_length, as publish.lua for one group.

--@include fmt
--@include new_job
--@include job_options
--@include bounds
--@include notify
--@include room
--@include now_ms
--@include ready_scores
--@include series
--@include tag_state
--@include count
--@include guard
--@include record
--@include group_room
--@include policy
--@include keys

local k = key_roles(KEYS, {'ready', 'delayed', 'body', 'meta', 'ctr', 'notify', 'stats',
  'dead', 'leased', 'wait', 'expiry', 'expired', 'gjobs'})
local unique_key = KEYS[14]
-- the keys written after the first write (meta is read before it), and ctr's counters
guard_keys({k.body, k.ready, k.delayed, k.expiry, k.ctr})
local policy = read_policy(ARGV[1])
local mode, aging_us, cap = policy.mode, policy.aging_us, policy.notify_cap
local now = now_ms()
local j, why = job_spec(ARGV[2])
local meta, run_at = nil, nil
if j then
  meta, run_at, why = read_job(j, now, ONCE_OPTIONS)
end
why = why or out_of_bounds(j, 'debounce_ms') or out_of_bounds(j, 'unique_ms')
if not why and j.debounce_ms and (j.delay_ms or j.run_at_ms) then
  why = 'debounce sets the run-at: give no delay_ms or run_at_ms'
end
if why then
  error('ZQ_BAD_ARGUMENT: ' .. why)
end
local debounce, unique = j.debounce_ms, j.unique_ms
local max_length, gmax = policy.max_length, policy.group_max_length
if not is_int(max_length, 0, MAX_QUEUE_LENGTH) then
  error('ZQ_BAD_ARGUMENT: max_length must be an integer in [0, ' .. MAX_QUEUE_LENGTH .. ']')
end
if not is_int(gmax, 0, MAX_GROUP_LENGTH) or (gmax > 0 and mode ~= 'fair') then
  error('ZQ_BAD_ARGUMENT: group_max_length must be an integer in [0, ' .. MAX_GROUP_LENGTH
    .. '] (fair mode only)')
end

local id = j.id
local state = tag_state(k, id)
if state == nil and redis.call('EXISTS', unique_key) == 1 then
  return {'clash', 'reserved'}
end
if state ~= nil and not (debounce and (state == 'ready' or state == 'delayed')) then
  return {'clash', state}
end

if debounce then
  run_at = now + debounce
end
if unique then
  meta.u = unique
end
local gmember = (meta.g or '') .. '\0' .. id
if gmax > 0 then
  guard_keys({k.gjobs})
  meta.gl = 1 -- written under the limit: its index entry counts (_group_room.lua)
end
-- the job's entry in the index of keyed jobs (KEYS[15]): step 1 checks the key (before
-- the first write), step 2 writes the entry
local function index_keyed(step)
  if not meta.o then
    return
  end
  local okeyed = KEYS[15]
  if step == 1 then
    if not okeyed then
      error('ZQ_BAD_ARGUMENT: a job with an ordering key needs KEYS[15] okeyed')
    end
    guard_keys({okeyed})
  else
    redis.call('ZADD', okeyed, 0, meta.o .. '\0' .. id)
  end
end
if state ~= nil then -- debounce a waiting job: keep its enqueue time and attempts
  index_keyed(1)
  local old = parse_record(redis.call('HGET', k.meta, id))
  if old then
    meta.e = tonumber(old.e) or now
    meta.a = tonumber(old.a)
    meta.k = old.k -- its dependents (a workflow parent) still wait for its end
  end
  if meta.b == nil then -- the JSON layout: its body apart (a first write: it may fail)
    redis.call('HSET', k.body, id, j.body)
  else
    redis.call('HDEL', k.body, id) -- a job written in the JSON layout had its body there
  end
  redis.call('ZREM', k.ready, id)
  redis.call('HSET', k.meta, id, (encode_record(meta)))
  redis.call('ZADD', k.delayed, run_at, id)
  index_expiry(k, {{id, meta}})
  index_keyed(2)
  if gmax > 0 then
    group_index(k, {}, {gmember})
  end
  notify(k.notify, 1, cap)
  return {'replaced'}
end
check_room(k, max_length, 1)
index_keyed(1)
local gstale = nil
if gmax > 0 then
  gstale = check_group_room(k, gmax, {meta.g or ''}, {[meta.g or ''] = 1})
end
local score = nil
if not (run_at and run_at > now) then
  score = fmt(ready_score(k.ctr, meta, mode, aging_us)) -- may raise: before the writes
end
if meta.b == nil then -- the JSON layout: its body apart (a first write: it may fail)
  redis.call('HSET', k.body, id, j.body)
end
redis.call('HSET', k.meta, id, (encode_record(meta)))
if score then
  redis.call('ZADD', k.ready, score, id)
else
  redis.call('ZADD', k.delayed, run_at, id)
end
index_expiry(k, {{id, meta}})
index_keyed(2)
if gstale then
  group_index(k, gstale, {gmember})
end
count_stat(k.stats, 'enqueued', 1)
bump(k.stats, 'e', 1, now, k.ready) -- a minute begun here: its depth
notify(k.notify, 1, cap)
return {'new'}
