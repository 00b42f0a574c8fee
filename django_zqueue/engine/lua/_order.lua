-- _order.lua: strict order per ordering key (record field `o`; docs/job-control.md,
-- "Strict order per key"), for claim.lua. k.ohold maps a key to the tag of the job that
-- holds it: the one job of the key that may be claimed, until it ends. A holder is named
-- "<id>\0<e>" (e: its record's enqueue time), so a later job under the same tag is not
-- taken for it. A job of a key
-- held by another live job is set aside: out of k.ready, into k.wait (its state reads
-- "waiting") and k.oaside, a lex ZSET of "key\0order\0score\0id" (order: its ready score
-- + 2^53 as fixed-width text, so a key's entries sort by their ready score; score: that
-- score as Redis gave it, to go back to ready exactly there).
-- A holder is live while its record holds the key and it is ready, delayed or leased
-- (retries and their backoff included: a lease that expires brings it back as the key's
-- holder), or dead without `od` (on_dead="block"); it ends when acked, cancelled,
-- deleted, expired, dead with `od` = 1, or when its record is gone. Nothing else tells
-- the claim: ending scripts do not touch these keys.
-- order_free(k, id, m, held): whether job `id` (record `m`, key m.o) may be claimed now
--   (reads only; `held`: this call's holders by key, so a batch takes one job per key).
-- holder_of(id, m): the name of job `id` (record `m`) as k.ohold holds it.
-- order_aside(k, entries, now): set {id, key, score} entries aside.
-- order_hold(k, holders): HSET k.ohold key -> holder for the {holder, key, id} claimed,
--   and their entries out of k.okeyed (the index of keyed jobs not yet claimed, "key\0id",
--   written by publish.lua / publish_once.lua; rank_key.lua reads it).
-- order_unindex(k, entries): the {id, record} entries out of k.okeyed (jobs of a key
--   that end at the claim: expired).
-- order_release(k, most): look at up to `most` keys with jobs set aside, in turn
--   (cursor: k.ctr field `ocur`); a key whose holder ended gets its next set-aside job
--   back in k.ready at its old score, as its new holder (entries whose job is no longer
--   waiting, cancelled or deleted meanwhile, are dropped: ORDER_STALE_MAX per key); a key
--   with none left is taken out of k.ohold. Returns whether any job is set aside.
-- order_sweep(k, most): `most` random entries of k.ohold (HRANDFIELD) whose holder ended
--   and whose key has no job set aside are removed: a key whose last job ended leaves no
--   field behind for long (the claim that ends nothing cannot know it); and `most` random
--   entries of k.okeyed (ZRANDMEMBER) whose job is no longer ready, set aside or delayed
--   (cancelled, deleted: those scripts do not touch the index) are removed.
-- Work: order_free O(log N) (5 reads at most); order_release O(most * ORDER_STALE_MAX
--   * log N); order_sweep O(most * log N).
--@include bounds
--@include record

local ORDER_SHIFT = MAX_EXACT -- scores lie within ±2^53
local ORDER_STALE_MAX = 8

local function order_member(o, score, id)
  return o .. '\0' .. string.format('%021.3f', tonumber(score) + ORDER_SHIFT) .. '\0' .. score
    .. '\0' .. id
end

-- the key, score and id of an entry of k.oaside; nil for an entry of another shape (no
-- script writes one: it is dropped where it is met)
local function order_parts(member)
  local a = string.find(member, '\0', 1, true)
  local b = a and string.find(member, '\0', a + 1, true)
  local c = b and string.find(member, '\0', b + 1, true)
  local score = c and string.sub(member, b + 1, c - 1)
  if not (score and tonumber(score)) then
    return nil
  end
  return string.sub(member, 1, a - 1), score, string.sub(member, c + 1)
end

local function holder_of(id, m)
  return id .. '\0' .. string.format('%.0f', m.e or 0)
end

local function order_alive(k, holder, o)
  local cut = string.find(holder, '\0', 1, true)
  local h, e = holder, nil
  if cut then
    h, e = string.sub(holder, 1, cut - 1), tonumber(string.sub(holder, cut + 1))
  end
  local raw = redis.call('HGET', k.meta, h)
  if not raw or redis.call('ZSCORE', k.expired, h) or redis.call('ZSCORE', k.wait, h) then
    return false
  end
  local m = parse_record(raw, true)
  if not m or m.o ~= o or (e and (m.e or 0) ~= e) then -- another job under the same tag
    return false
  end
  if redis.call('ZSCORE', k.dead, h) then
    return m.od ~= 1
  end
  return true
end

local function order_free(k, id, m, held)
  local o, me = m.o, holder_of(id, m)
  local h = held[o]
  if h == nil then
    h = redis.call('HGET', k.ohold, o)
    if h and h ~= me and not order_alive(k, h, o) then
      h = false
    end
  end
  if h and h ~= me then
    held[o] = h
    return false
  end
  held[o] = me
  return true
end

local function order_aside(k, entries, now)
  if #entries == 0 then
    return
  end
  local w, a = {}, {}
  for _, e in ipairs(entries) do
    w[#w + 1], w[#w + 2] = now, e[1]
    a[#a + 1], a[#a + 2] = 0, order_member(e[2], e[3], e[1])
  end
  redis.call('ZADD', k.wait, unpack(w))
  redis.call('ZADD', k.oaside, unpack(a))
end

local function order_hold(k, holders)
  if #holders == 0 then
    return
  end
  local h, x = {}, {}
  for _, e in ipairs(holders) do
    h[#h + 1], h[#h + 2] = e[2], e[1]
    x[#x + 1] = e[2] .. '\0' .. e[3]
  end
  redis.call('HSET', k.ohold, unpack(h))
  redis.call('ZREM', k.okeyed, unpack(x))
end

local function order_unindex(k, entries)
  local x = {}
  for _, e in ipairs(entries) do
    if e[2].o then
      x[#x + 1] = e[2].o .. '\0' .. e[1]
    end
  end
  if #x > 0 then
    redis.call('ZREM', k.okeyed, unpack(x))
  end
end

-- the next set-aside job of key o (first entry: `member`) back in ready, as its holder
local function order_next(k, o, member)
  for _ = 1, ORDER_STALE_MAX do
    if not member then
      redis.call('HDEL', k.ohold, o)
      return
    end
    local valid, score, id = order_parts(member)
    redis.call('ZREM', k.oaside, member)
    local m = valid and redis.call('ZSCORE', k.wait, id)
      and parse_record(redis.call('HGET', k.meta, id), true)
    if valid and not m then -- ended while set aside: out of the index too
      redis.call('ZREM', k.okeyed, o .. '\0' .. id)
    end
    if m then
      redis.call('ZREM', k.wait, id)
      redis.call('ZADD', k.ready, score, id)
      redis.call('HSET', k.ohold, o, holder_of(id, m))
      return
    end
    member = redis.call('ZRANGEBYLEX', k.oaside, '[' .. o .. '\0', '(' .. o .. '\1',
      'LIMIT', 0, 1)[1]
  end
end

local function order_release(k, most)
  if redis.call('EXISTS', k.oaside) == 0 then
    return false
  end
  local cursor = redis.call('HGET', k.ctr, 'ocur') or ''
  local wrapped = false
  for _ = 1, most do
    local from = '-'
    if cursor ~= '' then
      from = '(' .. cursor .. '\1'
    end
    local first = redis.call('ZRANGEBYLEX', k.oaside, from, '+', 'LIMIT', 0, 1)[1]
    if not first then
      if cursor == '' or wrapped then
        break
      end
      cursor, wrapped = '', true
    else
      local o = order_parts(first)
      if not o then -- an entry of another shape: dropped
        redis.call('ZREM', k.oaside, first)
      else
        cursor = o
        local h = redis.call('HGET', k.ohold, o)
        if not (h and order_alive(k, h, o)) then
          order_next(k, o, first)
        end
      end
    end
  end
  redis.call('HSET', k.ctr, 'ocur', cursor)
  return true
end

local function order_sweep(k, most)
  local got = redis.call('HRANDFIELD', k.ohold, most, 'WITHVALUES')
  for i = 1, #got, 2 do
    local o, h = got[i], got[i + 1]
    if not order_alive(k, h, o) and not redis.call('ZRANGEBYLEX', k.oaside, '[' .. o .. '\0',
        '(' .. o .. '\1', 'LIMIT', 0, 1)[1] then
      redis.call('HDEL', k.ohold, o)
    end
  end
  for _, x in ipairs(redis.call('ZRANDMEMBER', k.okeyed, most)) do
    local cut = string.find(x, '\0', 1, true)
    local id = cut and string.sub(x, cut + 1)
    if not (id and (redis.call('ZSCORE', k.ready, id) or redis.call('ZSCORE', k.wait, id)
        or redis.call('ZSCORE', k.delayed, id))) then
      redis.call('ZREM', k.okeyed, x)
    end
  end
end
