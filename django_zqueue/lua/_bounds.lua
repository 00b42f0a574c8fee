-- _bounds.lua: generated from django_zqueue/bounds.py (never edit a copy): the
-- bounds of what becomes a lease, a delay or a count, and BOUNDS, the bounds of a
-- job's options by name ({lowest, highest, integer only}). is_int: x is an integer
-- in [lo, hi] (NaN and infinities are not).
local MIN_LEASE_MS = 1000
local MAX_LEASE_MS = 604800000
local MAX_RETRIES = 1000
local MAX_DELAY_MS = 315360000000
local MAX_EXACT = 9007199254740992
local MAX_LINKS = 10000
local MAX_QUEUE_LENGTH = 1000000000000
local BOUNDS = {
  priority = {-1000, 1000, true},
  score = {-9007199254740992, 9007199254740992, false},
  delay_ms = {-9007199254740992, 315360000000, true},
  run_at_ms = {0, 9007199254740992, true},
  max_retries = {0, 1000, true},
  visibility_timeout_ms = {1000, 604800000, true},
  weight = {0.001, 1000, false},
  debounce_ms = {1, 315360000000, true},
  expires_in_ms = {1, 315360000000, true},
  expires_at_ms = {0, 9007199254740992, true},
  unique_ms = {1, 315360000000, true},
  need = {0, 10000, true},
  group_bytes = {1, 200, true},
  id_bytes = {1, 256, true},
}
local function is_int(x, lo, hi)
  return type(x) == 'number' and x == math.floor(x) and x >= lo and x <= hi
end
