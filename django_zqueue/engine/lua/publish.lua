-- publish.lua: add N new jobs, all or none (duplicate tags write nothing).
--
-- KEYS by role (_keys.lua, engine/keys.py SCRIPT_ROLES; ZQ_BAD_ARGUMENT, nothing written,
--   when a key is not its role's), in this order (docs/protocol.md calls it by position):
--   ready ZSET, delayed ZSET, body HASH (read for clashes only), meta HASH (the job's
--   record and body, _record.lua), ctr HASH, notify LIST, stats HASH, dead ZSET,
--   leased ZSET, wait ZSET (read only to name a clash with a job waiting for its
--   parents), expiry ZSET (the expiry of each job that has one), expired ZSET (read only
--   to name a clash with an expired job), gjobs ZSET (fair queues with group_max_length:
--   "<group>\0<id>" per job, _group_room.lua; not touched when the policy's
--   group_max_length is 0); then, only when some job of the call has an ordering key,
--   KEYS[14] okeyed ZSET (lex; ZQ_BAD_ARGUMENT, nothing written, when it is missing
--   then): "key\0id" per keyed job, the index of keyed jobs not yet claimed that
--   rank_key.lua reads (claim.lua trims it)
-- ARGV[1] the queue's policy, read by name (_policy.lua): mode ('strict' | 'tstrict' |
--   'aging' | 'fair'), aging_us (µs one priority step is worth), notify_cap, max_length
--   (most jobs ready + delayed in this shard; 0 = no limit), group_max_length (fair
--   queues: most jobs of one group ready + delayed; 0 = no limit)
-- ARGV[1 + i] job i, i = 1..n (jobs in this call, 1..MAX_PUBLISH_JOBS), one MessagePack map (_new_job.lua, django_zqueue/engine/records/spec.py): id,
--   body and the options it sets by name (priority, score, delay_ms, run_at_ms,
--   max_retries, visibility_timeout_ms, group, weight)
-- Raises ZQ_BAD_ARGUMENT (nothing written) for a job whose fields are out of bounds or
--   unknown; ZQ_QUEUE_FULL (nothing written) when the n jobs do not fit in max_length,
--   or the jobs of a group in their group's group_max_length.
-- Returns: {0} written; or {1, id, state, id, state, ...} for the tags already in use
--          (state: ready | delayed | leased | dead | waiting | expired | batch), nothing
--          written.
-- Work: O(n log N), in a constant number of Redis commands (multi-field HMGET, HSET and
--   ZADD; one job of the compact layout: HSETNX of its record in place of the HMGET and
--   the HSET) plus up to 4 ZSCOREs per clashing tag; with group_max_length, one ZLEXCOUNT per
--   group of the call, and for a group past it up to its limit + 1000 index entries read
--   (4000 in all, _group_room.lua).

--@include bounds
--@include now_ms
--@include new_job
--@include tag_state
--@include ready_scores
--@include series
--@include notify
--@include room
--@include count
--@include guard
--@include record
--@include group_room
--@include policy
--@include keys

local k = key_roles(KEYS, {'ready', 'delayed', 'body', 'meta', 'ctr', 'notify', 'stats',
  'dead', 'leased', 'wait', 'expiry', 'expired', 'gjobs'})
local policy = read_policy(ARGV[1])
local mode, aging_us, cap, n = policy.mode, policy.aging_us, policy.notify_cap, #ARGV - 1
-- 0. every job's arguments within bounds (Python checked them; this keeps a bad caller
-- from writing a record that other scripts would refuse)
local max_length, gmax = policy.max_length, policy.group_max_length
if not is_int(n, 1, MAX_PUBLISH_JOBS) or not is_int(max_length, 0, MAX_QUEUE_LENGTH)
    or not is_int(gmax, 0, MAX_GROUP_LENGTH) or (gmax > 0 and mode ~= 'fair') then
  error('ZQ_BAD_ARGUMENT: publish takes 1..' .. MAX_PUBLISH_JOBS .. ' jobs, one argument each, max_length 0..'
    .. MAX_QUEUE_LENGTH .. ', group_max_length 0..' .. MAX_GROUP_LENGTH .. ' (fair mode only)')
end
local now = now_ms()
local specs, records, runs, ids = {}, {}, {}, {} -- each job's map, record, run-at and id
for i = 1, n do
  local j, why = job_spec(ARGV[1 + i])
  local meta, run_at = nil, nil
  if j then
    meta, run_at, why = read_job(j, now)
  end
  if why then
    error('ZQ_BAD_ARGUMENT: job ' .. i .. ': ' .. why)
  end
  -- (false, not nil: a nil set in a list goes to its hash part, a slot each)
  specs[i], records[i], runs[i], ids[i] = j, meta, run_at or false, j.id
end

-- 1. every tag must be free. One job of the compact layout (the common call) claims its
-- tag by writing its record with HSETNX, the first write, after every check (the write
-- that detects a clash writes nothing then: no read before it); more jobs, one HMGET for
-- all, then the state only of those in use.
local alone = n == 1 and gmax == 0 and records[1].b ~= nil
local written = false -- the one job's record is written (it goes back if a later write fails)
if not alone then
  local clash = tags_in_use(k, ids)
  if clash then
    return clash
  end
end
check_room(k, max_length, n)
local gstale, gmembers = nil, {}
if gmax > 0 then -- each group's waiting jobs and the call's, before any write
  guard_keys({k.gjobs})
  local order, adds = {}, {}
  for i = 1, n do
    local g = records[i].g or ''
    if not adds[g] then
      adds[g] = 0
      order[#order + 1] = g
    end
    adds[g] = adds[g] + 1
    gmembers[i] = g .. '\0' .. ids[i]
    records[i].gl = 1 -- written under the limit: its index entry counts (_group_room.lua)
  end
  gstale = check_group_room(k, gmax, order, adds)
end

-- 2. records and where each job goes
local metas, later, bodies, keyed = {}, {}, {}, {}
local queued = {} -- {id, meta} of jobs ready now, in call order
local expiring = false -- some job has an expiry
for i = 1, n do
  local id = ids[i]
  local meta, run_at = records[i], runs[i]
  expiring = expiring or meta.x ~= nil
  if meta.b == nil then -- the JSON layout: its body apart
    bodies[#bodies + 1] = id
    bodies[#bodies + 1] = specs[i].body
  end
  metas[#metas + 1] = id
  metas[#metas + 1] = (encode_record(meta))
  if meta.o then
    keyed[#keyed + 1], keyed[#keyed + 2] = 0, meta.o .. '\0' .. id
  end
  if run_at and run_at > now then
    later[#later + 1] = run_at
    later[#later + 1] = id
  else
    queued[#queued + 1] = {id, meta}
  end
end
-- 3. the key checks (_guard.lua), before the first write, of the keys this call writes
-- (meta was read): delayed, expiry and body only when some job goes there. In strict
-- mode ctr is checked by the first write, the HINCRBY of seq (_ready_scores.lua), and
-- ready by the second, the ZADD of the ready jobs, whose error gives the sequence
-- numbers back first; in the other modes both are checked here.
local checks = {}
if #later > 0 then
  checks[#checks + 1] = k.delayed
end
if expiring then
  checks[#checks + 1] = k.expiry
end
if #bodies > 0 then
  checks[#checks + 1] = k.body
end
if mode ~= 'strict' then
  checks[#checks + 1] = k.ctr
  checks[#checks + 1] = k.ready
end
if #keyed > 0 then
  if not KEYS[14] then
    error('ZQ_BAD_ARGUMENT: jobs with an ordering key need KEYS[14] okeyed')
  end
  checks[#checks + 1] = KEYS[14]
end
guard_keys(checks)
if alone then
  if redis.call('HSETNX', k.meta, ids[1], metas[2]) == 0 then
    return {1, ids[1], tag_state(k, ids[1]) or 'unknown'}
  end
  written = true
end
-- a later write that fails takes the record back, so nothing is written (out of memory
-- included: the record is the one write before it)
local function unwrite()
  if written then
    redis.call('HDEL', k.meta, ids[1])
  end
end

-- 4. ready scores first (a spent sequence raises before anything is written), as
-- ready_score() would give them job by job, with one counter update
local scored = nil
if #queued > 0 then
  local ok
  ok, scored = pcall(ready_scores, k.ctr, queued, mode, aging_us)
  if not ok then
    unwrite()
    error(scored, 0)
  end
  if mode == 'strict' then
    local spent = 0 -- the sequence numbers taken (a job with its own score takes none)
    for _, e in ipairs(queued) do
      spent = spent + (e[2].s and 0 or 1)
    end
    written_reply(redis.pcall('ZADD', k.ready, unpack(scored)), k.ready, 'zset', function()
      -- (back to 0: the field was absent, as HINCRBY reads an absent one)
      if spent > 0 and redis.call('HINCRBY', k.ctr, 'seq', -spent) == 0 then
        redis.call('HDEL', k.ctr, 'seq')
      end
      unwrite()
    end)
    scored = nil -- added
  end
end
if #bodies > 0 then -- before the records: a wrong type of k.body fails before any job is written
  redis.call('HSET', k.body, unpack(bodies))
end
if not written then
  redis.call('HSET', k.meta, unpack(metas))
end
if #later > 0 then
  redis.call('ZADD', k.delayed, unpack(later))
end

if scored then
  redis.call('ZADD', k.ready, unpack(scored))
end
if gstale then
  group_index(k, gstale, gmembers)
end
if #keyed > 0 then
  redis.call('ZADD', KEYS[14], unpack(keyed))
end
if expiring then
  local entries = {}
  for i = 1, n do
    entries[i] = {ids[i], records[i]}
  end
  index_expiry(k, entries)
end

count_stat(k.stats, 'enqueued', n)
bump(k.stats, 'e', n, now, k.ready) -- a minute begun here: its depth
-- Delayed jobs wake consumers too: a sleeping consumer re-reads the earliest run-at.
notify(k.notify, n, cap)
return {0}
