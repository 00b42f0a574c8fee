-- proto_publish.lua: zq1_publish, wire protocol 1 (docs/protocol.md): one job from a
-- producer in any language, published as publish.lua publishes it, with the queue's
-- policy read from its proto hash (written by the engine: a worker's start, or
-- manage.py zqueue_protocol).
--
-- KEYS[1] .. KEYS[13] publish.lua's keys in its order, each {<prefix>:<queue>}:<name>:
--   ready delayed body meta ctr notify stats dead leased wait expiry expired gjobs
-- KEYS[14] proto    HASH (the queue's policy for producers: v, mode, aging_us,
--   notify_cap, max_length, group_max_length, layout, partitions, max_payload_bytes,
--   max_retries; a policy written by an older release has no max_retries: then 0)
-- ARGV[1] protocol version ('1')
-- ARGV[2] body: the JSON text {"task": "<dotted.path>", "args": [...], "kwargs": {...}},
--   stored as sent (the worker decodes it)
-- ARGV[3] options: a JSON object ('' or '{}': none) of id, priority, delay_ms, run_at_ms,
--   max_retries, visibility_timeout_ms, group, weight, expires_in_ms, expires_at_ms
--   (PROTOCOL_OPTIONS, _job_options.lua: the job spec's names and bounds, _new_job.lua); no id: one made from Redis TIME and
--   the queue's ctr field pseq; no max_retries (or null): the policy's max_retries
-- Raises (nothing written) ZQ_PROTOCOL: another protocol version, keys that are not one
--   queue's in this order, a queue not set up for producers or partitioned;
--   ZQ_BAD_ARGUMENT: a bad body, an unknown option or one out of bounds;
--   ZQ_QUEUE_FULL: as publish.lua; ZQ_CORRUPT_KEY: a key of another type.
-- Returns: {'ok', id} written; or {'clash', id, state} when the id is in use (state as
--   publish.lua names it), nothing written.
-- Work: O(log N), publish.lua's for one job.

--@include bounds
--@include guard
--@include job_options

local NAMES = {'ready', 'delayed', 'body', 'meta', 'ctr', 'notify', 'stats', 'dead', 'leased',
  'wait', 'expiry', 'expired', 'gjobs', 'proto'}
local MODES = {strict = true, tstrict = true, aging = true, fair = true}

if ARGV[1] ~= '1' then
  error('ZQ_PROTOCOL: unknown protocol version ' .. tostring(ARGV[1]) .. '; this server speaks 1')
end
if #KEYS ~= #NAMES or #ARGV ~= 3 then
  error('ZQ_PROTOCOL: zq1_publish takes 14 keys and 3 arguments (docs/protocol.md)')
end
local tag = string.match(KEYS[14], '^({.+}):proto$')
if not tag then
  error('ZQ_PROTOCOL: KEYS[14] must be {<prefix>:<queue>}:proto')
end
for i, name in ipairs(NAMES) do
  if KEYS[i] ~= tag .. ':' .. name then
    error('ZQ_PROTOCOL: KEYS[' .. i .. '] must be ' .. tag .. ':' .. name)
  end
end
guard_keys({KEYS[14], KEYS[5]})

-- the queue's policy
local raw = redis.call('HGETALL', KEYS[14])
local p = {}
for i = 1, #raw, 2 do
  p[raw[i]] = raw[i + 1]
end
if p.v == nil then
  error('ZQ_PROTOCOL: queue ' .. tag .. ' is not set up for producers: run manage.py ' ..
    'zqueue_protocol (or start a worker)')
end
if p.v ~= '1' then
  error('ZQ_PROTOCOL: queue ' .. tag .. ' is set up for protocol ' .. p.v .. ', not 1')
end
if p.partitions ~= '1' then
  error('ZQ_PROTOCOL: queue ' .. tag .. ' has ' .. tostring(p.partitions) .. ' partitions: ' ..
    'protocol 1 publishes to unpartitioned queues only')
end
local aging, cap, most = tonumber(p.aging_us), tonumber(p.notify_cap), tonumber(p.max_length)
local group_most = tonumber(p.group_max_length or '0')
local payload = tonumber(p.max_payload_bytes)
local retries = 0 -- the queue's max_retries (none in an older release's policy: 0)
if p.max_retries ~= nil then
  retries = string.match(p.max_retries, '^%d%d?%d?%d?$') and tonumber(p.max_retries)
end
if not (MODES[p.mode] and aging and cap and most and group_most and payload and
  retries and retries <= MAX_RETRIES and (p.layout == 'compact' or p.layout == 'json')) then
  error('ZQ_PROTOCOL: ' .. KEYS[14] .. ' holds no valid policy: run manage.py zqueue_protocol')
end

-- the body: the task call the worker decodes, within the queue's max_payload_bytes
if #ARGV[2] > payload then
  error('ZQ_BAD_ARGUMENT: the body is ' .. #ARGV[2] .. ' bytes, more than the ' ..
    'max_payload_bytes of the queue (' .. p.max_payload_bytes .. ')')
end
local ok, body = pcall(cjson.decode, ARGV[2])
if not ok or type(body) ~= 'table' or type(body.task) ~= 'string' or body.task == '' then
  error('ZQ_BAD_ARGUMENT: the body must be a JSON object with a non-empty string task')
end
for name, _ in pairs(body) do
  if name ~= 'task' and name ~= 'args' and name ~= 'kwargs' then
    error("ZQ_BAD_ARGUMENT: unknown body field '" .. tostring(name) .. "' (task, args, kwargs)")
  end
end
local n = 0
for _ in pairs(type(body.args) == 'table' and body.args or {}) do
  n = n + 1
end
if type(body.args) ~= 'table' or n ~= #body.args then
  error('ZQ_BAD_ARGUMENT: the body needs args, a JSON array')
end
if type(body.kwargs) ~= 'table' or #body.kwargs > 0 then
  error('ZQ_BAD_ARGUMENT: the body needs kwargs, a JSON object')
end
for name, _ in pairs(body.kwargs) do
  if type(name) ~= 'string' then
    error('ZQ_BAD_ARGUMENT: the body needs kwargs, a JSON object')
  end
end

-- the options, by the job spec's names (JSON null: not given)
local job = {body = ARGV[2]}
if ARGV[3] ~= '' then
  local fine, opts = pcall(cjson.decode, ARGV[3])
  if not fine or type(opts) ~= 'table' then
    error('ZQ_BAD_ARGUMENT: options must be a JSON object')
  end
  for name, v in pairs(opts) do
    if not PROTOCOL_OPTIONS[name] then
      error("ZQ_BAD_ARGUMENT: unknown option '" .. tostring(name) .. "'")
    end
    if v ~= cjson.null then
      job[name] = v
    end
  end
end
local seq = nil
if job.id == nil then -- unique: the server's time and the queue's own sequence
  seq = tonumber(redis.call('HGET', KEYS[5], 'pseq')) or 0
  if seq ~= math.floor(seq) or seq < 0 or seq >= MAX_EXACT then
    seq = 0
  end
  local t = redis.call('TIME')
  job.id = string.format('zq1-%s%06d-%d', t[1], tonumber(t[2]), seq + 1)
end
if job.max_retries == nil then
  job.max_retries = retries
end
if p.layout == 'json' then
  job.layout = 'json'
end

-- the queue's policy as publish.lua reads it (_policy.lua): the fields it reads, from the
-- proto hash
local policy = {mode = p.mode, aging_us = aging, notify_cap = cap, max_length = most,
  group_max_length = group_most}
local reply = publish_core({KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7],
  KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12], KEYS[13]},
  {cmsgpack.pack(policy), cmsgpack.pack(job)})
if reply[1] ~= 0 then
  return {'clash', reply[2], reply[3]}
end
if seq then
  redis.call('HSET', KEYS[5], 'pseq', string.format('%d', seq + 1))
end
return {'ok', job.id}
