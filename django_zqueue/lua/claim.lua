-- claim.lua: lease up to `batch` ready jobs to one consumer, within the queue's global
-- limits (max in flight, starts per second); first promotes due delayed jobs.
--
-- KEYS[1] ready   ZSET   KEYS[2] delayed ZSET   KEYS[3] leased ZSET   KEYS[4] body HASH
-- KEYS[5] meta    HASH   KEYS[6] ctr     HASH   KEYS[7] rate   HASH   KEYS[8] stats HASH
-- ARGV[1] batch (1..1000)                ARGV[2] visibility_ms (queue default lease)
-- ARGV[3] concurrency (0 = unlimited)    ARGV[4] qps (0 = unlimited)
-- ARGV[5] promote_limit                  ARGV[6] mode    ARGV[7] aging_us
-- ARGV[8] consumer id (free text, shown to operators)
-- Returns: {hint_ms, id1, body1, meta1, deadline1, id2, ...}
--   hint_ms when nothing was claimed: ms until the next delayed job is due or the rate
--   limit admits a start; -1 = nothing known (wait for a notify); 0 otherwise.
-- Work: O((batch + promote_limit) log N).

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
  for i = 1, #popped, 2 do
    local id = popped[i]
    local raw = redis.call('HGET', meta, id)
    local m = raw and cjson.decode(raw) or {p = 0, a = 0, m = 0, e = now}
    m.a = (m.a or 0) + 1
    m.t = redis.call('HINCRBY', ctr, 'tok', 1)
    m.c = consumer
    m.st = now
    local enc = cjson.encode(m)
    redis.call('HSET', meta, id, enc)
    local deadline = now + (m.v or vt)
    redis.call('ZADD', leased, deadline, id)
    out[#out + 1] = id
    out[#out + 1] = redis.call('HGET', body, id) or ''
    out[#out + 1] = enc
    out[#out + 1] = deadline
  end
  local got = (#out - 1) / 4
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
