-- _ready_scores.lua: ready scores for jobs in this order, with one counter update:
-- `entries` is a list of {id, meta}; returns the flat {score1, id1, score2, id2, ...}
-- that ZADD takes. A score is the record's raw score override (`s`), else priority +
-- FIFO order:
-- strict : a server-side sequence inside the priority's band;
-- tstrict: the same bands, the sequence from tick_seq (partitioned queues);
-- aging  : the monotonic server clock in microseconds minus priority * aging_us;
-- fair   : the virtual time of the job's group (fair_scores in _fair.lua).
-- A spent strict sequence raises before anything is written, and so does a ctr that is
-- not a hash or a seq that is not an integer (ZQ_CORRUPT_KEY). ready_score: the ready
-- score of one job record.
--@include priority_band
--@include tick_us
--@include tick_seq
--@include fmt
--@include fair
--@include guard

local function ready_scores(ctr, entries, mode, aging_us)
  if mode == 'fair' then
    return fair_scores(ctr, entries)
  end
  local need = 0
  for _, e in ipairs(entries) do
    if not e[2].s then
      need = need + 1
    end
  end
  local value = 0 -- the first sequence number (strict) or clock value (aging)
  if need > 0 then
    if mode == 'aging' then
      value = tick_us(ctr, 'clock')
      if need > 1 then
        redis.call('HSET', ctr, 'clock', fmt(value + need - 1))
      end
    elseif mode == 'tstrict' then
      value = tick_seq(ctr, need)
    else
      -- publish sends no guard of ctr before this, its first write: the reply says
      value = counter_reply(redis.pcall('HINCRBY', ctr, 'seq', need), ctr, 'seq') - need + 1
      if value + need - 1 >= PRIORITY_BAND then
        redis.call('HINCRBY', ctr, 'seq', -need) -- give the numbers back: nothing changed
        error('ZQ_SEQUENCE_EXHAUSTED: the queue has used 2^42 sequence numbers')
      end
    end
  end
  local out = {}
  for _, e in ipairs(entries) do
    local meta, score = e[2], nil
    if meta.s then
      score = tonumber(meta.s)
    else
      local step = PRIORITY_BAND
      if mode == 'aging' then
        step = aging_us
      end
      score = value - (meta.p or 0) * step
      value = value + 1
    end
    out[#out + 1] = fmt(score)
    out[#out + 1] = e[1]
  end
  return out
end

local function ready_score(ctr, meta, mode, aging_us)
  return tonumber(ready_scores(ctr, {{'', meta}}, mode, aging_us)[1])
end
