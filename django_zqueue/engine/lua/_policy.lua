-- _policy.lua: a queue's policy, one argument of each script that takes it: a MessagePack
-- map read by name (made once per queue by django_zqueue/engine/scripts' Policy.packed):
-- mode, aging_us, notify_cap, ack_notify, visibility_ms, concurrency, qps, promote_limit,
-- dead_max, dead_ttl_ms, trim_limit, keep_finished, finished_ttl_ms, group_concurrency,
-- group_qps, max_length, group_max_length, compact. A script reads the names it needs.
-- read_policy(raw): the decoded map; raises ZQ_BAD_ARGUMENT when `raw` is not one, or one
--   of its numbers is not a finite number >= 0 or its mode not a text (the scripts read
--   it before any write, so a bad policy writes nothing).
local POLICY_NUMBERS = {'aging_us', 'notify_cap', 'ack_notify', 'visibility_ms',
  'concurrency', 'qps', 'promote_limit', 'dead_max', 'dead_ttl_ms', 'trim_limit',
  'keep_finished', 'finished_ttl_ms', 'group_concurrency', 'group_qps', 'max_length',
  'group_max_length'}

local function read_policy(raw)
  local ok, p = false, nil
  if type(raw) == 'string' and raw ~= '' then
    ok, p = pcall(cmsgpack.unpack, raw)
  end
  if not ok or type(p) ~= 'table' or type(p.mode) ~= 'string' then
    error('ZQ_BAD_ARGUMENT: the queue policy must be a MessagePack map with a mode')
  end
  for _, name in ipairs(POLICY_NUMBERS) do
    local x = p[name]
    if type(x) ~= 'number' or not (x >= 0 and x < math.huge) then
      error('ZQ_BAD_ARGUMENT: the queue policy\'s ' .. name .. ' must be a number >= 0')
    end
  end
  return p
end
