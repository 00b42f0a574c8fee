-- _bounds.lua: generated from django_zqueue/conf/bounds.py (never edit a copy): the
-- bounds of what becomes a lease, a delay or a count, and bound(name), the bounds of
-- a job's option by name (lowest, highest, integer only). is_int: x is an integer
-- in [lo, hi] (NaN and infinities are not).
local MIN_LEASE_MS = 1000
local MAX_LEASE_MS = 604800000
local MAX_RETRIES = 1000
local MAX_DELAY_MS = 315360000000
local MAX_EXACT = 9007199254740992
local MAX_LINKS = 10000
local MAX_QUEUE_LENGTH = 1000000000000
local MAX_GROUP_LENGTH = 1000
local PRIORITY_MIN = -1000
local PRIORITY_MAX = 1000
local MAX_GROUP_BYTES = 200
local MIN_WEIGHT = 0.001
local MAX_WEIGHT = 1000
local MAX_GROUP_CONCURRENCY = 1000
local MAX_GROUP_QPS = 1000000
local MAX_VTIME = 1125899906842624
local MAX_GROUP_ADDS = 1000000
local MAX_PAGE = 1000
local MAX_NEEDLE_BYTES = 1000
local MAX_FIELD_PATH_BYTES = 200
local MAX_FIELD_PATH_PARTS = 24
local MAX_STEP_FIELDS = 10000
local MAX_VALUE_BYTES = 16777216
local MAX_NOTIFY_CAP = 1000000
local MAX_PUBLISH_JOBS = 100
local function bound(name) -- a table would be built on every call: an if chain is not
  if name == 'priority' then return -1000, 1000, true end
  if name == 'score' then return -9007199254740992, 9007199254740992, false end
  if name == 'delay_ms' then return -9007199254740992, 315360000000, true end
  if name == 'run_at_ms' then return 0, 9007199254740992, true end
  if name == 'max_retries' then return 0, 1000, true end
  if name == 'visibility_timeout_ms' then return 1000, 604800000, true end
  if name == 'weight' then return 0.001, 1000, false end
  if name == 'debounce_ms' then return 1, 315360000000, true end
  if name == 'expires_in_ms' then return 1, 315360000000, true end
  if name == 'expires_at_ms' then return 0, 9007199254740992, true end
  if name == 'unique_ms' then return 1, 315360000000, true end
  if name == 'need' then return 0, 10000, true end
  if name == 'group_bytes' then return 1, 200, true end
  if name == 'ordering_key_bytes' then return 1, 200, true end
  if name == 'id_bytes' then return 1, 256, true end
  error('no bound named ' .. tostring(name))
end
local function is_int(x, lo, hi)
  return type(x) == 'number' and x == math.floor(x) and x >= lo and x <= hi
end
