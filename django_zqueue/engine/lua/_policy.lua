-- _policy.lua: a queue's policy, one argument of each script that takes it: a MessagePack
-- map read by name (made once per queue and script by django_zqueue/engine/scripts'
-- Policy.packed_for, with only the fields that script's source names; Policy.packed holds
-- them all): mode, aging_us, notify_cap, ack_notify, visibility_ms, concurrency, qps,
-- promote_limit, dead_max, dead_ttl_ms, trim_limit, keep_finished, finished_ttl_ms,
-- group_concurrency, group_qps, max_length, group_max_length, compact.
-- read_policy(raw): the decoded map; raises ZQ_BAD_ARGUMENT when `raw` is not a map, a
--   name in it is not a policy field, a number field is not a finite number >= 0 or the
--   mode not a text (the scripts read it before any write, so a bad policy writes
--   nothing); reading a field the map does not hold raises ZQ_BAD_ARGUMENT too, so a
--   field the caller did not send is never taken for a nil.
--   A policy read once is kept, by its bytes, in a table of the library (at most
--   POLICY_KEPT of them, the table emptied when full): a queue sends the same bytes with
--   every call of a script, so a call pays one table lookup, not a decode and its checks.
--   The map is shared by every call of every script: it is read-only (a write raises). Under
--   EVAL (a Cluster) the table lives for one call and every call decodes.
local POLICY_KINDS = {mode = 'string', compact = 'boolean', aging_us = 'number',
  notify_cap = 'number', ack_notify = 'number', visibility_ms = 'number',
  concurrency = 'number', qps = 'number', promote_limit = 'number', dead_max = 'number',
  dead_ttl_ms = 'number', trim_limit = 'number', keep_finished = 'number',
  finished_ttl_ms = 'number', group_concurrency = 'number', group_qps = 'number',
  max_length = 'number', group_max_length = 'number'}

local POLICY_MISSING = {__index = function(_, name)
  error('ZQ_BAD_ARGUMENT: the queue policy sent holds no ' .. tostring(name))
end}
local function policy_write()
  error('ZQ_BAD_ARGUMENT: the queue policy is read-only')
end

local POLICY_KEPT = 50
local policy_seen, policy_count = {}, 0

local function decode_policy(raw)
  local ok, p = false, nil
  if type(raw) == 'string' and raw ~= '' then
    ok, p = pcall(cmsgpack.unpack, raw)
  end
  if not ok or type(p) ~= 'table' then
    error('ZQ_BAD_ARGUMENT: the queue policy must be a MessagePack map')
  end
  for name, x in pairs(p) do
    local kind = POLICY_KINDS[name]
    if kind == nil or type(x) ~= kind or (kind == 'number' and not (x >= 0 and x < math.huge)) then
      error('ZQ_BAD_ARGUMENT: the queue policy\'s ' .. tostring(name) .. ' must be a '
        .. (kind == 'number' and 'number >= 0' or (kind or 'known field')))
    end
  end
  -- a view of the fields: a read looks them up (a table as __index: no Lua call), a
  -- write raises, as a read of a field not sent does
  return setmetatable({}, {__index = setmetatable(p, POLICY_MISSING), __newindex = policy_write})
end

local function read_policy(raw)
  local p = policy_seen[raw]
  if p == nil then
    p = decode_policy(raw)
    if policy_count >= POLICY_KEPT then
      policy_seen, policy_count = {}, 0
    end
    policy_seen[raw], policy_count = p, policy_count + 1
  end
  return p
end
