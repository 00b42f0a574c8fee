-- _tick_seq.lua: the sequence of a partitioned queue in strict mode ('tstrict'):
-- milliseconds of Redis TIME since 2025-01-01T00:00:00Z, or one more than the last value
-- when TIME has not moved on, kept in HASH ctr field 'tseq'. Comparable across the
-- queue's partitions (one clock), strictly increasing within one (FIFO). Reserves `n`
-- numbers and returns the first; raises ZQ_SEQUENCE_EXHAUSTED, writing nothing, past
-- 2^42 - 1.
--@include now_ms
--@include priority_band
--@include fmt

local TSEQ_EPOCH_MS = 1735689600000
local function tick_seq(ctr, n)
  local seq = now_ms() - TSEQ_EPOCH_MS
  local last = tonumber(redis.call('HGET', ctr, 'tseq') or '0')
  if seq <= last then
    seq = last + 1
  end
  if seq + n - 1 >= PRIORITY_BAND then
    error('ZQ_SEQUENCE_EXHAUSTED: the partition has used 2^42 sequence numbers')
  end
  redis.call('HSET', ctr, 'tseq', fmt(seq + n - 1))
  return seq
end
