-- _fair.lua: weighted fair order for a queue with fairness = 'groups' (docs/fairness.md).
-- Start-time fair queuing on virtual time, kept in HASH ctr: field 'vt' is the queue's
-- virtual time (the highest ready score claimed so far), field 'g:<group>' the virtual
-- finish time of a group that has jobs queued. A job of weight w costs 1/w.
-- fair_scores: the ready scores of `entries` ({id, meta}, in this order), as ready_scores
--   returns them: start = max(group's finish, vt); the group's finish becomes start + 1/w;
--   score = start - priority / w (a priority is a head start of that many of the group's
--   turns). A raw score (`s`) is used as it is and leaves the group alone. Raises
--   ZQ_SEQUENCE_EXHAUSTED, writing nothing, past MAX_VTIME (2^50, _bounds.lua).
-- fair_claimed: after a claim of `good` ({id, meta, body, score}): advance vt, forget the
--   finish of a group that has nothing else queued (so an idle group costs no memory),
--   and count each group's starts in HASH k.gstarts (this minute; the previous minute's
--   counts move to k.gstarts_prev; ctr field 'gmin' is the minute of k.gstarts).
-- fair_sweep: look at `count` fields of ctr from a rotating cursor (field 'fsweep') and
--   drop group finishes at or below vt (the same as no entry): the state of a group whose
--   last jobs were deleted rather than claimed.
--@include bounds
--@include fmt

local function fair_scores(ctr, entries)
  local fields, seen = {'vt'}, {}
  for _, e in ipairs(entries) do
    local f = 'g:' .. (e[2].g or '')
    if not e[2].s and not seen[f] then
      seen[f] = true
      fields[#fields + 1] = f
    end
  end
  local vals = redis.call('HMGET', ctr, unpack(fields))
  local vt = tonumber(vals[1]) or 0
  local finish = {}
  for i = 2, #fields do
    finish[fields[i]] = tonumber(vals[i])
  end
  local out = {}
  for _, e in ipairs(entries) do
    local meta, score = e[2], nil
    if meta.s then
      score = tonumber(meta.s)
    else
      local f = 'g:' .. (meta.g or '')
      local start = math.max(finish[f] or vt, vt)
      local cost = 1 / (meta.w or 1)
      finish[f] = start + cost
      if finish[f] >= MAX_VTIME then
        error('ZQ_SEQUENCE_EXHAUSTED: the queue has used its virtual time (2^50)')
      end
      score = start - (meta.p or 0) * cost
    end
    out[#out + 1] = fmt(score)
    out[#out + 1] = e[1]
  end
  if #fields > 1 then
    local set = {}
    for i = 2, #fields do
      set[#set + 1] = fields[i]
      set[#set + 1] = fmt(finish[fields[i]])
    end
    redis.call('HSET', ctr, unpack(set))
  end
  return out
end

local function fair_starts(k, counts, now)
  local minute = math.floor(now / 60000)
  local held = tonumber(redis.call('HGET', k.ctr, 'gmin') or '-1')
  if held ~= minute then
    redis.call('UNLINK', k.gstarts_prev) -- lazily freed: no long call with many groups
    if held == minute - 1 and redis.call('EXISTS', k.gstarts) == 1 then
      redis.call('RENAME', k.gstarts, k.gstarts_prev)
    else
      redis.call('UNLINK', k.gstarts)
    end
    redis.call('HSET', k.ctr, 'gmin', minute)
  end
  local groups = {}
  for group in pairs(counts) do
    groups[#groups + 1] = group
  end
  if #groups > 0 then -- one read and one write for all the groups of the call
    local held_n = redis.call('HMGET', k.gstarts, unpack(groups))
    local set = {}
    for i, group in ipairs(groups) do
      set[#set + 1] = group
      set[#set + 1] = (tonumber(held_n[i]) or 0) + counts[group]
    end
    redis.call('HSET', k.gstarts, unpack(set))
  end
end

local function fair_claimed(k, good, now)
  local vt = tonumber(redis.call('HGET', k.ctr, 'vt') or '0')
  local edge, counts = {}, {}
  for _, g in ipairs(good) do
    local meta = g[2]
    local group = meta.g or ''
    counts[group] = (counts[group] or 0) + 1
    if not meta.s then
      local cost = 1 / (meta.w or 1)
      local score = tonumber(g[4])
      local start = score + (meta.p or 0) * cost
      vt = math.max(vt, score)
      -- the group's finish is start + cost when this was its last job queued; half a
      -- turn more absorbs rounding
      local f = 'g:' .. group
      edge[f] = math.max(edge[f] or -math.huge, start + 1.5 * cost)
    end
  end
  redis.call('HSET', k.ctr, 'vt', fmt(vt))
  local fields = {}
  for f in pairs(edge) do
    fields[#fields + 1] = f
  end
  if #fields > 0 then
    local vals = redis.call('HMGET', k.ctr, unpack(fields))
    local gone = {}
    for i, f in ipairs(fields) do
      local finish = tonumber(vals[i])
      if finish and finish < edge[f] then
        gone[#gone + 1] = f
      end
    end
    if #gone > 0 then
      redis.call('HDEL', k.ctr, unpack(gone))
    end
  end
  fair_starts(k, counts, now)
end

local function fair_sweep(k, count)
  local r = redis.call('HSCAN', k.ctr, redis.call('HGET', k.ctr, 'fsweep') or '0',
    'COUNT', count)
  local vt = tonumber(redis.call('HGET', k.ctr, 'vt') or '0')
  local gone = {}
  for i = 1, #r[2], 2 do
    local f = r[2][i]
    if string.sub(f, 1, 2) == 'g:' and tonumber(r[2][i + 1]) <= vt then
      gone[#gone + 1] = f
    end
  end
  if #gone > 0 then
    redis.call('HDEL', k.ctr, unpack(gone))
  end
  redis.call('HSET', k.ctr, 'fsweep', r[1])
end
