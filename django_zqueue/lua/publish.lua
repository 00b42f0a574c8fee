-- publish.lua: add N new jobs, all or none (duplicate tags write nothing).
--
-- KEYS[1] ready     ZSET   KEYS[2] delayed  ZSET   KEYS[3] body   HASH
-- KEYS[4] meta      HASH   KEYS[5] ctr      HASH   KEYS[6] notify LIST
-- KEYS[7] stats     HASH   KEYS[8] dead     ZSET   KEYS[9] leased ZSET
-- ARGV[1] mode ('strict' | 'aging')     ARGV[2] aging_us (µs one priority step is worth)
-- ARGV[3] notify_cap                    ARGV[4] n (jobs in this call, 1..1000)
-- ARGV[5 + 8*(i-1) ..] per job i:
--   id, body, priority, score ('' = computed), delay_ms ('' = none),
--   run_at_ms ('' = none; absolute, Redis TIME), max_retries, visibility_ms ('' = queue's)
-- Returns: {0} written; or {1, id, state, id, state, ...} for the tags already in use
--          (state: ready | delayed | leased | dead | batch), nothing written.
-- Work: O(n log N).

local k = {ready = KEYS[1], delayed = KEYS[2], body = KEYS[3], meta = KEYS[4], ctr = KEYS[5],
  notify = KEYS[6], stats = KEYS[7], dead = KEYS[8], leased = KEYS[9]}
local mode, aging_us, cap, n = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])

local clash = {}
local seen = {}
for i = 0, n - 1 do
  local id = ARGV[5 + 8 * i]
  if seen[id] then
    clash[#clash + 1] = id
    clash[#clash + 1] = 'batch'
  else
    local state = tag_state(k, id)
    if state then
      clash[#clash + 1] = id
      clash[#clash + 1] = state
    end
  end
  seen[id] = true
end
if #clash > 0 then
  table.insert(clash, 1, 1)
  return clash
end

local now = now_ms()
for i = 0, n - 1 do
  add_job(k, ARGV, 5 + 8 * i, now, mode, aging_us)
end
redis.call('HINCRBY', k.stats, 'enqueued', n)
bump(k.stats, 'e', n, now)
sample_depth(k.stats, k.ready, now)
-- Delayed jobs wake consumers too: a sleeping consumer re-reads the earliest run-at.
notify(k.notify, n, cap)
return {0}
