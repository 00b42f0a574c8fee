-- rank_key.lua (read-only): a waiting job's place among the waiting jobs of its own
-- ordering key (docs/job-control.md, "Strict order per key"), in the order the key's jobs
-- will run: the key's holder first when it waits in ready, then the key's other waiting
-- jobs (in ready, or set aside in oaside) by their ready score, then tag (the order of
-- ready, and of a key's entries in oaside). Without a live holder, the key's first job
-- set aside comes back first (the claim's order_release, _order.lua, before it reads
-- the line) and counts as its holder. Delayed jobs are not waiting: they join their
-- key's line when due.
--
-- KEYS by role (_keys.lua, engine/keys.py SCRIPT_ROLES; ZQ_BAD_ARGUMENT when a key is
--   not its role's): ready ZSET, wait ZSET, meta HASH, ohold HASH, oaside ZSET (lex),
--   okeyed ZSET (lex, "key\0id": the keyed jobs not yet claimed; publish.lua and
--   publish_once.lua write it, claim.lua trims it), leased ZSET, delayed ZSET, dead ZSET
--   (read to tell whether the key's holder is live)
-- ARGV[1] id   ARGV[2] most (1 .. 100000): the most entries read from oaside and from
--   okeyed for the key
-- Returns: {0, rank} the job waits, at 0-based place `rank` in its key's line;
--   {1} not waiting (no record, or neither ready nor set aside: leased, delayed, dead,
--   ended); {2} its record has no ordering key; {3} unknown: the job waits but is in
--   no index (written before the index existed, or claimed once and back without being
--   its key's holder: a requeued dead job); {4} unknown: the key has more than `most`
--   entries in oaside or okeyed.
-- Entries of okeyed whose job no longer waits in ready, or whose record now holds
--   another key, are skipped (the claim sweeps them: _order.lua order_sweep); entries of
--   oaside whose job is no longer in wait likewise.
-- Work: O((a + x) log N): a and x the key's entries in oaside and okeyed (at most `most`
--   each), one ZSCORE each, plus one HGET and record decode per okeyed entry in ready.

--@include record
--@include keys

local k = key_roles(KEYS, {'ready', 'wait', 'meta', 'ohold', 'oaside', 'okeyed', 'leased',
  'delayed', 'dead'})
local id, most = ARGV[1], tonumber(ARGV[2])
if not (most and most >= 1 and most <= 100000 and most == math.floor(most)) then
  error('ZQ_BAD_ARGUMENT: most must be an integer in [1, 100000]')
end
local m = parse_record(redis.call('HGET', k.meta, id), true)
if not m then
  return {1}
end
local in_ready = redis.call('ZSCORE', k.ready, id)
if not in_ready and not redis.call('ZSCORE', k.wait, id) then
  return {1}
end
local o = m.o
if not o then
  return {2}
end
local low, high = '[' .. o .. '\0', '(' .. o .. '\1'
local line = {} -- id -> ready score (a number), of the key's waiting jobs
local first_aside = nil
local aside = redis.call('ZRANGEBYLEX', k.oaside, low, high, 'LIMIT', 0, most + 1)
local keyed = redis.call('ZRANGEBYLEX', k.okeyed, low, high, 'LIMIT', 0, most + 1)
if #aside > most or #keyed > most then
  return {4}
end
for _, member in ipairs(aside) do
  -- "key\0order\0score\0id" (_order.lua order_member)
  local a = string.find(member, '\0', 1, true)
  local b = a and string.find(member, '\0', a + 1, true)
  local c = b and string.find(member, '\0', b + 1, true)
  local score = c and tonumber(string.sub(member, b + 1, c - 1))
  local job = c and string.sub(member, c + 1)
  if score and redis.call('ZSCORE', k.wait, job) then
    line[job] = score
    if not first_aside then -- (entries sort by their score: the first is the key's next)
      first_aside = job
    end
  end
end
local indexed = line[id] ~= nil
for _, member in ipairs(keyed) do
  local job = string.sub(member, #o + 2)
  indexed = indexed or job == id
  if line[job] == nil then
    local score = redis.call('ZSCORE', k.ready, job)
    local r = score and parse_record(redis.call('HGET', k.meta, job), true)
    if r and r.o == o then
      line[job] = tonumber(score)
    end
  end
end
-- the holder: a job of the key claimed once, back in ready (a retry, a lease that ran
-- out) is in no index but still runs first. A live holder elsewhere (leased, delayed,
-- dead without `od`) runs before all of them: no job of the key is ahead of another for
-- it. With no live holder the key's first job set aside comes back first.
local holder, live = nil, false
local h = redis.call('HGET', k.ohold, o)
if h then
  local cut = string.find(h, '\0', 1, true)
  local hid = cut and string.sub(h, 1, cut - 1) or h
  local e = cut and tonumber(string.sub(h, cut + 1))
  local r = parse_record(redis.call('HGET', k.meta, hid), true)
  if r and r.o == o and (not e or (r.e or 0) == e) then
    local score = redis.call('ZSCORE', k.ready, hid)
    if score then
      holder, live, line[hid] = hid, true, tonumber(score)
    else
      live = redis.call('ZSCORE', k.leased, hid) or redis.call('ZSCORE', k.delayed, hid)
        or (redis.call('ZSCORE', k.dead, hid) and r.od ~= 1)
    end
  end
end
if not live and first_aside then
  holder = first_aside
end
if holder == id then
  return {0, 0}
end
if not indexed then
  return {3}
end
local mine = line[id]
if mine == nil then -- (in ready, indexed, but its record changed key: not this key's)
  return {3}
end
local rank = holder and 1 or 0
for job, score in pairs(line) do
  if job ~= holder and job ~= id and (score < mine or (score == mine and job < id)) then
    rank = rank + 1
  end
end
return {0, rank}
