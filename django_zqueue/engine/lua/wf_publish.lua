-- wf_publish.lua: add N new jobs of a workflow, all or none (duplicate tags write
-- nothing): as publish.lua, and each job may wait for parents (state "waiting": in
-- `wait`, not in line) and may have dependents (its links in its own `wf:<id>` hash).
--
-- KEYS by role (_keys.lua, engine/keys.py SCRIPT_ROLES; ZQ_BAD_ARGUMENT, nothing written,
--   when a key is not its role's): as publish.lua, ready ZSET, delayed ZSET, body HASH
--   (unused), meta HASH (records, _record.lua), ctr HASH, notify LIST, stats HASH,
--   dead ZSET, leased ZSET, wait ZSET, expiry ZSET, expired ZSET, gjobs ZSET (not touched
--   when the policy's group_max_length is 0); then
-- KEYS[13 + i] wf HASH of job i (its workflow links), i = 1..n
-- ARGV[1] the queue's policy, read by name (_policy.lua): mode, aging_us, notify_cap,
--   max_length (as publish.lua; counts the jobs that enter ready or delayed now,
--   not those that wait for parents)
--   and group_max_length (as publish.lua; counts the jobs of each group that enter
--   ready or delayed now; every job of the call is indexed, a waiting one counts once its
--   parents release it)
-- ARGV[1 + i] job i, i = 1..n (1..MAX_PUBLISH_JOBS), one MessagePack map as in publish.lua, with three more fields:
--   need (parents to wait for, 0..10000, absent = 0; > 0: no delay), kids (JSON list of
--   its dependents [queue, tag, index], absent = none), parents (JSON list of
--   [queue, tag], absent = none), and opt (its places that take any end of their
--   parent, wf_resolve.lua: '*' or a JSON list of places, absent = none)
-- Raises ZQ_BAD_ARGUMENT (nothing written) for arguments out of bounds; ZQ_QUEUE_FULL
--   (nothing written) past max_length or a group's group_max_length.
-- Returns: {0} written; or {1, id, state, ...} for the tags already in use, nothing written.
-- Work: O(n log N) plus the size of the links written; with group_max_length, as
--   publish.lua.

--@include new_job
--@include notify
--@include room
--@include now_ms
--@include ready_scores
--@include series
--@include tag_state
--@include bounds
--@include count
--@include guard
--@include record
--@include group_room
--@include policy
--@include keys

local k = key_roles(KEYS, {'ready', 'delayed', 'body', 'meta', 'ctr', 'notify', 'stats',
  'dead', 'leased', 'wait', 'expiry', 'expired', 'gjobs'})
-- the keys written after the first write (meta is read before it), and ctr's counters
guard_keys({k.ready, k.delayed, k.wait, k.expiry, k.ctr})
local policy = read_policy(ARGV[1])
local mode, aging_us, cap, n = policy.mode, policy.aging_us, policy.notify_cap, #ARGV - 1
local max_length, gmax = policy.max_length, policy.group_max_length
if not is_int(n, 1, MAX_PUBLISH_JOBS) or #KEYS ~= 13 + n
    or not is_int(max_length, 0, MAX_QUEUE_LENGTH) or not is_int(gmax, 0, MAX_GROUP_LENGTH)
    or (gmax > 0 and mode ~= 'fair') then
  error('ZQ_BAD_ARGUMENT: wf_publish needs 1..' .. MAX_PUBLISH_JOBS
    .. ' jobs, one wf key and one argument each')
end
local LINKS = {need = true, kids = true, parents = true, opt = true}

local now = now_ms()
local specs, records, runs, ids = {}, {}, {}, {} -- each job's map, record, run-at and id
for i = 1, n do
  local j, why = job_spec(ARGV[1 + i])
  local meta, run_at = nil, nil
  if j then
    meta, run_at, why = read_job(j, now, LINKS)
  end
  why = why or out_of_bounds(j, 'need')
  if not why and (j.kids ~= nil and type(j.kids) ~= 'string'
      or j.parents ~= nil and type(j.parents) ~= 'string'
      or j.opt ~= nil and type(j.opt) ~= 'string') then
    why = 'kids, parents and opt must be text'
  end
  if not why and (j.need or 0) > 0 and (j.delay_ms or j.run_at_ms) then
    why = 'a job that waits for parents cannot be delayed'
  end
  if not why and j.ordering_key ~= nil then -- (a set-aside job waits in k.wait too)
    why = 'a workflow job takes no ordering_key'
  end
  if why then
    error('ZQ_BAD_ARGUMENT: job ' .. i .. ': ' .. why)
  end
  specs[i], records[i], runs[i], ids[i] = j, meta, run_at, j.id
end

local clash = tags_in_use(k, ids)
if clash then
  return clash
end
local entering = 0
for i = 1, n do
  if (specs[i].need or 0) == 0 then
    entering = entering + 1
  end
end
check_room(k, max_length, entering)
local gstale, gmembers = nil, {}
if gmax > 0 then -- each group's jobs entering a line now, before any write
  guard_keys({k.gjobs})
  local order, adds = {}, {}
  for i = 1, n do
    local g = records[i].g or ''
    if not adds[g] then
      adds[g] = 0
      order[#order + 1] = g
    end
    if (specs[i].need or 0) == 0 then
      adds[g] = adds[g] + 1
    end
    gmembers[i] = g .. '\0' .. ids[i]
    records[i].gl = 1 -- written under the limit: its index entry counts (_group_room.lua)
  end
  gstale = check_group_room(k, gmax, order, adds)
end

local metas, bodies, later, waiting, queued, links = {}, {}, {}, {}, {}, {}
for i = 1, n do
  local j = specs[i]
  local id = ids[i]
  local meta, run_at = records[i], runs[i]
  local need, kids, parents = j.need or 0, j.kids, j.parents
  local wf = {}
  if need > 0 then
    meta.n = need
    wf[#wf + 1] = 'need'
    wf[#wf + 1] = need
    waiting[#waiting + 1] = now
    waiting[#waiting + 1] = id
  elseif run_at and run_at > now then
    later[#later + 1] = run_at
    later[#later + 1] = id
  else
    queued[#queued + 1] = {id, meta}
  end
  if kids and kids ~= '' then
    meta.k = 1
    wf[#wf + 1] = 'kids'
    wf[#wf + 1] = kids
  end
  if parents and parents ~= '' then
    wf[#wf + 1] = 'par'
    wf[#wf + 1] = parents
  end
  if need > 0 and j.opt and j.opt ~= '' then
    wf[#wf + 1] = 'opt'
    wf[#wf + 1] = j.opt
  end
  if #wf > 0 then
    links[#links + 1] = {KEYS[13 + i], wf}
  end
  if meta.b == nil then -- the JSON layout: its body apart
    bodies[#bodies + 1] = id
    bodies[#bodies + 1] = j.body
  end
  metas[#metas + 1] = id
  metas[#metas + 1] = (encode_record(meta))
end
local scored = nil
if #queued > 0 then
  scored = ready_scores(k.ctr, queued, mode, aging_us) -- may raise: before any write
end
if #bodies > 0 then -- before the records: a wrong type of k.body fails before any job is written
  redis.call('HSET', k.body, unpack(bodies))
end
redis.call('HSET', k.meta, unpack(metas))
for _, l in ipairs(links) do
  local wf = l[1]
  redis.call('DEL', wf) -- links left by an earlier job of the same tag
  redis.call('HSET', wf, unpack(l[2]))
end
if #later > 0 then
  redis.call('ZADD', k.delayed, unpack(later))
end
if #waiting > 0 then
  redis.call('ZADD', k.wait, unpack(waiting))
end
if scored then
  redis.call('ZADD', k.ready, unpack(scored))
end
if gstale then
  group_index(k, gstale, gmembers)
end
local entries = {}
for i = 1, n do
  entries[i] = {ids[i], records[i]}
end
index_expiry(k, entries)
count_stat(k.stats, 'enqueued', n)
bump(k.stats, 'e', n, now, k.ready) -- a minute begun here: its depth
if #queued + #later > 0 then
  notify(k.notify, #queued + #later, cap)
end
return {0}
