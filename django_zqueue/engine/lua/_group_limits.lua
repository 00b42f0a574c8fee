-- _group_limits.lua: per-group limits of a fair queue (group_concurrency, group_qps;
-- docs/fairness.md#per-group-limits), used by claim_fair.lua. `lim` is the call's state:
-- {c = group_concurrency (0: none), q = group_qps (0: none), T = ms per start, tau = the
-- bucket's tolerance in ms, budget = in-flight entries still to check, inflight = {},
-- tat = {}, took = {}}.
-- Keys (fields of k): ginflight ZSET, all scores 0, member "<group>\0<token>\0<id>" per
-- job leased by claim_fair (stale once the record no longer holds that token: acked,
-- retried, recovered, released; pruned when counted); grate HASH group -> theoretical
-- arrival time in ms (GCRA form of a token bucket of max(q, 1) starts refilled at q/s);
-- gpark ZSET, scores 0, member "<group>\0<order>\0<score>\0<run-at>\0<id>" per job set
-- aside (the job itself waits in delayed at <run-at>); gwait ZSET group -> ms when its
-- set-aside jobs are looked at again.
-- group_admits: true, or false and when to look again, or nil (check budget spent).
-- group_took: account for one start of the group in this call.
-- park / unpark: set jobs aside; bring back the jobs of groups that have room.
-- limits_sweep: check `count` in-flight entries and qps fields from rotating cursors,
--   so an idle group's entries are dropped.
--@include record
--@include park_member

local GROUP_CHECK_MS = 50 -- a group waiting for a slot is looked at again after this long
local PARK_MS = 86400000 -- run-at of a set-aside job: the fallback if no claim comes back
local PARK_MAX = 100 -- jobs set aside per call
local UNPARK_GROUPS = 4 -- waiting groups looked at per call
local VERIFY_BUDGET = 2000 -- in-flight entries checked per call
local SWEEP_BUSY = 10 -- entries of each sweep per call that leased jobs
local SWEEP_IDLE = 200 -- per call that leased nothing (an idle consumer's poll)
local UNPARK_EXTRA = 20 -- set-aside entries read beyond a group's room (deleted jobs)

local function lex_range(group)
  return '[' .. group .. '\0', '(' .. group .. '\1'
end

-- live in-flight entries among `members` (one group's or the sweep's); stale ones removed
local function prune(k, members)
  if #members == 0 then
    return 0
  end
  local ids, toks = {}, {}
  for i, m in ipairs(members) do
    local _, tok, id = string.match(m, '^(.-)%z(%d+)%z(.*)$')
    ids[i], toks[i] = id or '', tonumber(tok)
  end
  local metas = redis.call('HMGET', k.meta, unpack(ids))
  local live, stale = 0, {}
  for i, raw in ipairs(metas) do
    local meta = parse_record(raw, true)
    if meta and meta.t == toks[i] then
      live = live + 1
    else
      stale[#stale + 1] = members[i]
    end
  end
  if #stale > 0 then
    redis.call('ZREM', k.ginflight, unpack(stale))
  end
  return live
end

local function group_inflight(k, lim, group)
  local n = lim.inflight[group]
  if n then
    return n
  end
  local lo, hi = lex_range(group)
  n = redis.call('ZLEXCOUNT', k.ginflight, lo, hi)
  if n >= lim.c then -- stale entries only inflate the count: check when it matters
    if n > lim.budget then
      return nil
    end
    lim.budget = lim.budget - n
    n = prune(k, redis.call('ZRANGEBYLEX', k.ginflight, lo, hi))
  end
  lim.inflight[group] = n
  return n
end

local function group_tat(k, lim, group, now)
  local t = lim.tat[group]
  if t == nil then
    t = tonumber(redis.call('HGET', k.grate, group)) or now
    lim.tat[group] = t
  end
  return math.max(t, now)
end

local function group_admits(k, lim, group, now)
  if lim.c > 0 then
    local n = group_inflight(k, lim, group)
    if n == nil then
      return nil
    end
    if n >= lim.c then
      return false, now + GROUP_CHECK_MS
    end
  end
  if lim.q > 0 then
    local tat = group_tat(k, lim, group, now)
    if tat - now > lim.tau then
      return false, math.ceil(tat - lim.tau)
    end
  end
  return true
end

local function group_took(k, lim, group, now)
  if lim.c > 0 then
    lim.inflight[group] = lim.inflight[group] + 1
  end
  if lim.q > 0 then
    lim.tat[group] = group_tat(k, lim, group, now) + lim.T
    lim.took[group] = true
  end
end

-- parked: list of {id, group, score (string), wake ms}
local function park(k, parked, now)
  local run_at = now + PARK_MS
  local delayed, index, wait = {}, {}, {}
  for _, p in ipairs(parked) do
    delayed[#delayed + 1] = run_at
    delayed[#delayed + 1] = p[1]
    index[#index + 1] = 0
    index[#index + 1] = park_member(p[2], p[3], run_at, p[1])
    wait[#wait + 1] = p[4]
    wait[#wait + 1] = p[2]
  end
  redis.call('ZADD', k.delayed, unpack(delayed))
  redis.call('ZADD', k.gpark, unpack(index))
  redis.call('ZADD', k.gwait, 'LT', unpack(wait)) -- new groups added, waiting ones kept
end

-- how many starts the group may make now (at most PARK_MAX)
local function group_room(k, lim, group, now)
  local room = PARK_MAX
  if lim.c > 0 then
    room = math.min(room, lim.c - group_inflight(k, lim, group))
  end
  if lim.q > 0 then
    local spare = lim.tau - (group_tat(k, lim, group, now) - now)
    room = math.min(room, math.floor(spare / lim.T) + 1)
  end
  return room
end

local function unpark(k, lim, now)
  local groups = redis.call('ZRANGEBYSCORE', k.gwait, '-inf', now, 'LIMIT', 0, UNPARK_GROUPS)
  for _, group in ipairs(groups) do
    local ok, wake = group_admits(k, lim, group, now)
    if ok == nil then
      return
    end
    if ok then
      local lo, hi = lex_range(group)
      local room = group_room(k, lim, group, now)
      -- read a few more than the room: entries of jobs deleted meanwhile are dropped
      local members = redis.call('ZRANGEBYLEX', k.gpark, lo, hi, 'LIMIT', 0,
        math.min(PARK_MAX, room + UNPARK_EXTRA))
      local ids, scores = {}, {}
      for i, m in ipairs(members) do
        local _, _, score, run_at, id = string.match(m, '^(.-)%z([^%z]*)%z([^%z]*)%z(%d+)%z(.*)$')
        ids[i], scores[i] = id or '', {score, tonumber(run_at)}
      end
      if #members > 0 then
        local at = redis.call('ZMSCORE', k.delayed, unpack(ids))
        local back, out, gone = {}, {}, {}
        for i, id in ipairs(ids) do
          local live = at[i] and tonumber(at[i]) == scores[i][2] -- still the job set aside
          if live and #out >= room then
            break
          end
          if live then
            back[#back + 1] = scores[i][1]
            back[#back + 1] = id
            out[#out + 1] = id
          end
          gone[#gone + 1] = members[i]
        end
        redis.call('ZREM', k.gpark, unpack(gone))
        if #out > 0 then
          redis.call('ZREM', k.delayed, unpack(out))
          redis.call('ZADD', k.ready, unpack(back))
        end
      end
      if redis.call('ZLEXCOUNT', k.gpark, lo, hi) == 0 then
        redis.call('ZREM', k.gwait, group)
      else
        redis.call('ZADD', k.gwait, now + GROUP_CHECK_MS, group)
      end
    else
      redis.call('ZADD', k.gwait, wake, group)
    end
  end
end

local function limits_sweep(k, lim, now, count)
  if lim.c > 0 then
    local cur = redis.call('HGET', k.ctr, 'gsweep')
    local members = redis.call('ZRANGEBYLEX', k.ginflight, cur and '(' .. cur or '-', '+',
      'LIMIT', 0, count)
    if #members > 0 then
      redis.call('HSET', k.ctr, 'gsweep', members[#members])
      prune(k, members)
    else
      redis.call('HDEL', k.ctr, 'gsweep')
    end
  end
  if lim.q > 0 then
    local r = redis.call('HSCAN', k.grate, redis.call('HGET', k.ctr, 'qsweep') or '0',
      'COUNT', count)
    local done = {}
    for i = 1, #r[2], 2 do
      if tonumber(r[2][i + 1]) <= now then -- a full bucket: the same as no entry
        done[#done + 1] = r[2][i]
      end
    end
    if #done > 0 then
      redis.call('HDEL', k.grate, unpack(done))
    end
    redis.call('HSET', k.ctr, 'qsweep', r[1])
  end
end
