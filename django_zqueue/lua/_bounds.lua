-- _bounds.lua: the bounds of what becomes a lease, a delay or a count; the same numbers
-- as django_zqueue/bounds.py (tests/test_scripts.py checks they agree). is_int: x is an
-- integer in [lo, hi] (NaN and infinities are not).

local MIN_LEASE_MS = 1000 -- 1 s
local MAX_LEASE_MS = 604800000 -- 7 days
local MAX_RETRIES = 1000
local MAX_DELAY_MS = 315360000000 -- 3650 days: the horizon of a delay or run-at
local MAX_EXACT = 9007199254740992 -- 2^53: larger numbers lose precision as doubles
local function is_int(x, lo, hi)
  return type(x) == 'number' and x == math.floor(x) and x >= lo and x <= hi
end
