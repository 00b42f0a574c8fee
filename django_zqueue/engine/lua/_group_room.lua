-- _group_room.lua: the queue limit group_max_length of a fair queue (conf.py
-- QueueOptions.group_max_length; docs/fairness.md#a-groups-waiting-jobs-group_max_length).
-- k.gjobs: ZSET, all scores 0, member "<group>\0<id>" per job published while the limit
--   is set (publish, publish_once, wf_publish). Its count is derived when read, so no
--   other script keeps it: an entry counts when its job waits (the id is in ready or
--   delayed) and its record, written under the limit (record field gl = 1), names
--   <group>; it is kept while such a record exists (in flight, dead, waiting for parents:
--   it may come back); it is stale when the record is gone, names another group, or was
--   written without the limit (the tag was reused: published again by a process without
--   the limit, its job is not counted, as none published so is).
-- check_group_room(k, limit, order, adds): raise ZQ_QUEUE_FULL, before any write, unless every
--   group of `order` (the call's groups) holds at most `limit` waiting jobs with its
--   `adds[group]` more. Each group's entries are counted first (ZLEXCOUNT, an upper
--   bound); only a group whose count passes the limit has its entries read and checked
--   (at most limit + GROUP_SLACK of them, GROUP_WALK in all per call; entries not read
--   count as waiting, so a check cut short may refuse, never let a group past its limit).
--   Returns the stale entries it found, for group_index.
-- group_index(k, stale, members): drop `stale` and add `members` (after the checks).
-- group_sweep(k, count): check `count` entries from a rotating cursor (ctr field
--   'jsweep', the last entry checked) and drop the stale ones, so the entries of an idle
--   group's finished jobs go too (claim_fair.lua, on a queue with the limit).
--@include record

local GROUP_SLACK = 1000 -- entries of a group's jobs not waiting, read past its limit
local GROUP_WALK = 4000 -- entries read per call, in all
local GROUP_STEP = 1000 -- ids per command (unpack has a limit)

local function group_lex(group)
  return '[' .. group .. '\0', '(' .. group .. '\1'
end

-- the jobs waiting among members[from .. to] (entries of `group`); stale ones appended
local function group_live(k, group, members, from, to, stale)
  local ids, skip = {}, #group + 2
  for i = from, to do
    ids[#ids + 1] = string.sub(members[i], skip)
  end
  local ready = redis.call('ZMSCORE', k.ready, unpack(ids))
  local delayed = redis.call('ZMSCORE', k.delayed, unpack(ids))
  local raws = redis.call('HMGET', k.meta, unpack(ids))
  local live = 0
  for i, raw in ipairs(raws) do
    local meta = raw and parse_record(raw, true)
    -- an unreadable record is kept (and counted while in line): it is not this code's to judge
    if raw and (not meta or ((meta.g or '') == group and meta.gl == 1)) then
      if ready[i] or delayed[i] then
        live = live + 1
      end
    else
      stale[#stale + 1] = members[from + i - 1]
    end
  end
  return live
end

local function check_group_room(k, limit, order, adds)
  local stale, budget = {}, GROUP_WALK
  for _, group in ipairs(order) do
    local n = adds[group] or 0
    local lo, hi = group_lex(group)
    local held = n > 0 and redis.call('ZLEXCOUNT', k.gjobs, lo, hi) or 0
    if n > 0 and held + n > limit then -- entries of jobs not waiting inflate it: look
      local want = math.min(budget, limit + GROUP_SLACK)
      local members = {}
      if want > 0 then
        members = redis.call('ZRANGEBYLEX', k.gjobs, lo, hi, 'LIMIT', 0, want)
      end
      budget = budget - #members
      local waiting = held - #members -- not read: counted as waiting
      for from = 1, #members, GROUP_STEP do
        waiting = waiting + group_live(k, group, members, from,
          math.min(from + GROUP_STEP - 1, #members), stale)
      end
      if waiting + n > limit then
        error(string.format('ZQ_QUEUE_FULL: group %q has %d jobs waiting and %d more would'
          .. ' pass group_max_length %d; nothing was written: retry later, or raise the'
          .. ' queue option group_max_length', group, waiting, n, limit))
      end
    end
  end
  return stale
end

local function group_sweep(k, count)
  local cur = redis.call('HGET', k.ctr, 'jsweep')
  local members = redis.call('ZRANGEBYLEX', k.gjobs, cur and '(' .. cur or '-', '+',
    'LIMIT', 0, count)
  if #members == 0 then
    redis.call('HDEL', k.ctr, 'jsweep')
    return
  end
  redis.call('HSET', k.ctr, 'jsweep', members[#members])
  local groups, ids = {}, {}
  for i, m in ipairs(members) do
    local at = string.find(m, '\0', 1, true) or #m + 1 -- a group has no NUL; an id may
    groups[i], ids[i] = string.sub(m, 1, at - 1), string.sub(m, at + 1)
  end
  local raws = redis.call('HMGET', k.meta, unpack(ids))
  local stale = {}
  for i, raw in ipairs(raws) do
    local meta = raw and parse_record(raw, true)
    if not (raw and (not meta or ((meta.g or '') == groups[i] and meta.gl == 1))) then
      stale[#stale + 1] = members[i]
    end
  end
  if #stale > 0 then
    redis.call('ZREM', k.gjobs, unpack(stale))
  end
end

local function group_index(k, stale, members)
  for from = 1, #stale, GROUP_STEP do
    redis.call('ZREM', k.gjobs, unpack(stale, from, math.min(from + GROUP_STEP - 1, #stale)))
  end
  local add = {}
  for _, m in ipairs(members) do
    add[#add + 1] = 0
    add[#add + 1] = m
  end
  if #add > 0 then
    redis.call('ZADD', k.gjobs, unpack(add))
  end
end
