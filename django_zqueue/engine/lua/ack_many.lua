-- ack_many.lua: finish up to 100 deliveries of one shard in one call (a worker's flush).
-- Each job is acked exactly as ack.lua would (same checks, same writes), but the
-- removals and the stats are made once for all of them.
--
-- KEYS by role (_keys.lua, engine/keys.py SCRIPT_ROLES), in this order: leased ZSET, body
--   HASH, meta HASH, errors HASH, progress HASH, stats HASH, notify LIST; then KEYS[8..]
--   the result STRING key of each job that keeps a result, in job order; then, only when the
--   policy's keep_finished > 0 (the history of finished jobs, _history.lua), its keys by
--   role: finished ZSET, cancels ZSET, history HASH, then the logs HASH (the logs of the
--   jobs the history's bound drops go too)
-- ARGV[1] the queue's policy, read by name (_policy.lua): ack_notify (the notify cap on
--   ack: 0 = don't notify; set when the queue has a concurrency limit), keep_finished
--   (0: keep no history, and touch none of its keys; the history is an optional write:
--   with one of its three keys of another type the jobs are acked all the same, without
--   their history, and that key is left as it was), trim_limit (history entries removed
--   at most per call, besides the room for this call's jobs; the bound by count,
--   _history.lua's bound_history: the age bound is scan's)
-- ARGV[2] the jobs, one MessagePack map of columns read by name, each a list with one
--   value per job, in job order (decoded once per call, not once per job): `id`, `token`
--   (the claim's, an integer); `result` (JSON; '' = keep none) and `ttl_ms` (the
--   result's TTL; 0 for a job without a result) only when some job keeps a result;
--   `run_ms` (its run time; -1 = not measured) only when some job's was measured
-- Raises ZQ_BAD_ARGUMENT (nothing written) when the arguments are malformed: not 1..100
--   jobs, columns that are not such a map or lists of another length, an id that is not
--   a text, a token, TTL or run time that is not an integer, or not one result key per
--   job that keeps a result (and the three history keys with a keep_finished > 0), or a
--   policy that is not one (_policy.lua).
-- Returns: {r1, r2, ...}, one per job: 1 acked; 0 stale (not leased under this token,
--   or listed twice in the call): nothing changed for it; 2 not acked here, nothing
--   changed for it: its record has a field only ack.lua handles (FULL_ACK_FIELDS: `u`,
--   a unique_for reservation; `k`, `n`, a workflow job whose end goes to the outbox;
--   `d`, a job with durable step records to delete):
--   the caller acks it with ack.lua.
--   The token of a compact record is read from its unpacked fields (not its body); of a
--   JSON-layout record from its text (`"t":<token>` right after `{` or `,`: a quote
--   inside a JSON string is always escaped, so no string value can fake it). A record
--   that holds no such token is stale, as in ack.lua.
-- Work: O(n log N) for n jobs, in a constant number of commands plus one
--   SET (kept result) per job; with a history, O((n + limit) log N) more, in at most 9
--   commands, its key checks included (and one HGET per job of the JSON layout, for its
--   body).

--@include bounds
--@include now_ms
--@include series
--@include notify
--@include record_text
--@include record
--@include count
--@include guard
--@include history
--@include entry
--@include policy
--@include keys

local k = key_roles(KEYS, {'leased', 'body', 'meta', 'errors', 'progress', 'stats', 'notify'})
local ROLES = 7 -- the keys before the jobs' result keys
local FULL_ACK_FIELDS = LEASED_FIRST -- the fields only ack.lua handles (_record.lua)

local policy = read_policy(ARGV[1])
local cap, keep, limit = policy.ack_notify, policy.keep_finished, policy.trim_limit
local function bad(why)
  error('ZQ_BAD_ARGUMENT: ack_many: ' .. why)
end
local cols = #ARGV == 2 and entry(ARGV[2])
local ids, toks = cols and cols.id, cols and cols.token
local n = type(ids) == 'table' and #ids or 0
if n < 1 or n > 100 then
  bad('needs a policy and the columns of 1..100 jobs')
end
local results, ttls, runs = cols.result, cols.ttl_ms, cols.run_ms
local function column(list, name)
  if list ~= nil and (type(list) ~= 'table' or #list ~= n) then
    bad('column ' .. name .. ' must list one value per job (' .. n .. ')')
  end
end
column(toks, 'token')
column(results, 'result')
column(ttls, 'ttl_ms')
column(runs, 'run_ms')
if toks == nil or (results == nil) ~= (ttls == nil) then
  bad('needs the columns id and token, and ttl_ms with result')
end
local function whole(x) -- an integer a double holds exactly (its '%d' text is its own)
  return is_int(x, -MAX_EXACT, MAX_EXACT)
end
-- each job's values, checked once: results ('' = none, counted), run times (false: not
-- measured)
local kept_results = 0
for i = 1, n do
  local id, token = ids[i], toks[i]
  if type(id) ~= 'string' then
    bad('id of job ' .. i .. ' is not a text')
  end
  if not whole(token) then
    bad('token of job ' .. id .. ' is not an integer')
  end
  local result = results and results[i]
  if results and type(result) ~= 'string' then
    bad('result of job ' .. id .. ' is not a text')
  end
  if result and result ~= '' then
    kept_results = kept_results + 1
    local ttl = ttls[i]
    if not whole(ttl) or ttl < 1 then
      bad('result TTL of job ' .. id .. ' must be a positive integer (ms)')
    end
  end
  local run = runs and runs[i]
  if runs and not (whole(run) and run >= -1) then
    bad('run time of job ' .. id .. ' must be an integer >= 0 (ms), or -1: not measured')
  end
end
local keeps = keep > 0 -- the history's keys are passed (and not guarded: read, or soft)
local history = keeps -- and kept: not when one of them holds another type
if #KEYS ~= ROLES + kept_results + (keeps and 4 or 0) then
  bad('needs one result key per job that keeps a result, then the 4 history keys with a history')
end
local hk = ROLES + kept_results -- the history's keys, by role, when passed
local h = keeps and key_roles({KEYS[hk + 1], KEYS[hk + 2], KEYS[hk + 3]},
  {'finished', 'cancels', 'history'})

local metas = redis.call('HMGET', k.meta, unpack(ids))
local leased = redis.call('ZMSCORE', k.leased, unpack(ids)) -- false: not leased
-- the key checks (_guard.lua), of the keys this call may write without having read them
-- first: `meta` (HMGET) and `leased` (ZMSCORE) were read, so a wrong type of either has
-- failed already; `body` only when a record of the JSON layout is read (its body is
-- kept in the history from there): otherwise its HDEL (of bodies a JSON-layout record
-- left) is soft, and a wrong type loses nothing
local json_layout = false
for i = 1, n do
  json_layout = json_layout or (metas[i] and string.byte(metas[i], 1) == 123)
end
-- With a history, its two indexes are read instead (their sizes, used below): a wrong
-- type skips the history (index_sizes); and the history HASH is the first key
-- written (keep_ended's HSET, below, soft): a wrong type skips the history, nothing of
-- it written.
local finished_size, cancels_empty = 0, false
if history then
  finished_size, cancels_empty = index_sizes(h.finished, h.cancels)
  history = finished_size ~= nil
end
local checked = {k.errors, k.progress, k.stats, k.notify}
if json_layout then
  checked[#checked + 1] = k.body
end
for i = ROLES + 1, hk do -- the result keys
  checked[#checked + 1] = KEYS[i]
end
guard_keys(checked)
-- does record `raw` hold delivery token `token` (its text; `tok`, the number), and does
-- it have a field only
-- ack.lua handles (`u`: a unique_for reservation to write; `k`, `n`: a workflow job, its
-- end recorded in the outbox)? A compact record's fields are unpacked (not its body); a
-- JSON one is read from its text first, and decoded, as ack.lua does, only when its
-- token is written otherwise (e.g. as 1.2e+14)
local function read_ack(raw, tok)
  local holds, full = leased_token(raw, tok) -- a record as claim wrote it: not unpacked
  if holds ~= nil then
    return holds, full
  end
  if string.byte(raw, 1) ~= 123 then
    local meta = parse_record(raw, true)
    if not meta then
      return false, false
    end
    for _, name in ipairs(FULL_ACK_FIELDS) do
      if meta[name] ~= nil then
        return meta.t == tok, true
      end
    end
    return meta.t == tok, false
  end
  local holds = text_field_is(raw, 't', string.format('%d', tok))
  if not holds then
    local ok, meta = pcall(cjson.decode, raw)
    holds = ok and type(meta) == 'table' and meta.t == tok
  end
  for _, name in ipairs(FULL_ACK_FIELDS) do
    if text_has_field(raw, name) then
      return holds, true
    end
  end
  return holds, false
end

local out, done, seen, kept, heads = {}, {}, {}, {}, {} -- heads: ended_head's memo
-- with a history, each job's errors (kept in its history entry, _history.lua's with_errors)
-- (an errors hash of another type keeps none: it is not checked, its writes cannot stop
-- a script)
local errs = history and soft_value(redis.pcall('HMGET', k.errors, unpack(ids))) or {}
local to_set = {} -- the kept results: their key's index in KEYS, their job's index
local run_ms, key = 0, ROLES + 1
local clock = redis.call('TIME')
local now = ms_of(clock)
for i = 1, n do
  local id = ids[i]
  local raw = metas[i]
  local ok, later, full = false, false, false
  if raw and not seen[id] then
    ok, full = read_ack(raw, toks[i])
    ok = ok and leased[i] ~= false
  end
  if ok then
    seen[id] = true
    if full then
      ok, later = false, true
    end
  end
  local result = results and results[i] or ''
  if result ~= '' then
    if ok then -- written after the history (its first write)
      to_set[#to_set + 1] = key
      to_set[#to_set + 1] = i
    end
    key = key + 1
  end
  if ok then
    done[#done + 1] = id
    local run = runs and runs[i]
    if run == -1 then
      run = nil
    end
    if run then
      run_ms = run_ms + run
    end
    if history then -- its record, kept in the history (before the record goes)
      kept[#kept + 1] = id -- HSET's arguments: the id, then its kept record
      local head = with_errors(ended_head(now, run, heads), errs[i])
      kept[#kept + 1] = kept_record(raw, head, k.body, id)
    end
    out[i] = 1
  elseif later then
    out[i] = 2
  else
    out[i] = 0
  end
end
if #done == 0 then
  return out
end
if history then
  local added = keep_ended(h.finished, h.cancels, h.history, done, kept, clock,
    cancels_empty, true)
  if added then
    bound_history(h.finished, h.history, keep, #done, limit, finished_size + added,
      KEYS[hk + 4])
  end
end
for r = 1, #to_set, 2 do
  local result_key, i = KEYS[to_set[r]], to_set[r + 1]
  redis.call('SET', result_key, results[i], 'PX', string.format('%d', ttls[i]))
end
redis.call('ZREM', k.leased, unpack(done))
soft('HDEL', k.body, unpack(done))
redis.call('HDEL', k.meta, unpack(done))
soft('HDEL', k.errors, unpack(done))
soft('HDEL', k.progress, unpack(done))
count_stat(k.stats, 'acked', #done)
bump(k.stats, 'a', #done, now)
if run_ms > 0 then
  count_stat(k.stats, 'run_ms', run_ms)
  bump(k.stats, 't', run_ms, now)
end
if cap > 0 then
  notify(k.notify, #done, cap)
end
return out
