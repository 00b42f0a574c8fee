-- claim.lua: lease up to `batch` ready jobs to one consumer, within the queue's global
-- limits (max in flight, starts per second); first promotes due delayed jobs.
--
-- KEYS[1] ready   ZSET   KEYS[2] delayed ZSET   KEYS[3] leased ZSET   KEYS[4] body HASH
-- KEYS[5] meta    HASH   KEYS[6] ctr     HASH   KEYS[7] rate   HASH   KEYS[8] stats HASH
-- ARGV[1] batch (1..100)                 ARGV[2] visibility_ms (queue default lease)
-- ARGV[3] concurrency (0 = unlimited)    ARGV[4] qps (0 = unlimited)
-- ARGV[5] promote_limit                  ARGV[6] mode    ARGV[7] aging_us
-- ARGV[8] consumer id (free text, shown to operators)
-- Returns: {hint_ms, id1, body1, meta1, deadline1, id2, ...}
--   hint_ms when nothing was claimed: ms until the next delayed job is due or the rate
--   limit admits a start; -1 = nothing known (wait for a notify); 0 otherwise.
-- Work: O((batch + promote_limit) log N); the claimed jobs take a constant number of
--   Redis commands (multi-key HMGET, HSET, ZADD), the promoted ones 3 each.

local ready, delayed, leased, body, meta = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local ctr, rate, stats = KEYS[6], KEYS[7], KEYS[8]
local batch, vt = tonumber(ARGV[1]), tonumber(ARGV[2])
local concurrency, qps = tonumber(ARGV[3]), tonumber(ARGV[4])
local mode, aging_us, consumer = ARGV[6], tonumber(ARGV[7]), ARGV[8]

local now = now_ms()
promote(delayed, ready, meta, ctr, now, tonumber(ARGV[5]), mode, aging_us)

local n = batch
local hint = -1
if concurrency > 0 then
  local room = concurrency - redis.call('ZCARD', leased)
  if room < n then
    n = room
  end
end
local tokens, last
if qps > 0 and n > 0 then
  local state = redis.call('HMGET', rate, 'tokens', 'ts')
  local burst = math.max(qps, 1)
  tokens = tonumber(state[1]) or burst
  last = tonumber(state[2]) or now
  if now > last then
    tokens = math.min(burst, tokens + (now - last) * qps / 1000)
  end
  local whole = math.floor(tokens)
  if whole < n then
    n = whole
    if n <= 0 then
      hint = math.ceil((1 - tokens) * 1000 / qps)
    end
  end
end

local out = {0}
if n > 0 then
  local popped = redis.call('ZPOPMIN', ready, n)
  local got = #popped / 2
  if got > 0 then
    local ids = {}
    for i = 1, got do
      ids[i] = popped[2 * i - 1]
    end
    local metas = redis.call('HMGET', meta, unpack(ids))
    local bodies = redis.call('HMGET', body, unpack(ids))
    local first = redis.call('HINCRBY', ctr, 'tok', got) - got + 1
    local new_meta, lease = {}, {}
    for i, id in ipairs(ids) do
      local m = metas[i] and cjson.decode(metas[i]) or {p = 0, a = 0, m = 0, e = now}
      m.a = (m.a or 0) + 1
      m.t = first + i - 1
      m.c = consumer
      m.st = now
      m.q = popped[2 * i] -- its place in line, for release()
      local enc = cjson.encode(m)
      local deadline = now + (m.v or vt)
      new_meta[#new_meta + 1] = id
      new_meta[#new_meta + 1] = enc
      lease[#lease + 1] = deadline
      lease[#lease + 1] = id
      out[#out + 1] = id
      out[#out + 1] = bodies[i] or ''
      out[#out + 1] = enc
      out[#out + 1] = deadline
    end
    redis.call('HSET', meta, unpack(new_meta))
    redis.call('ZADD', leased, unpack(lease))
  end
  if qps > 0 then
    redis.call('HSET', rate, 'tokens', fmt(tokens - got), 'ts', now)
  end
  if got > 0 then
    redis.call('HINCRBY', stats, 'claimed', got)
    return out
  end
end
if hint < 0 then
  local first = redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')
  if first[2] then
    hint = math.max(0, tonumber(first[2]) - now)
  end
end
out[1] = hint
return out
