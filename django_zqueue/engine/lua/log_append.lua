-- log_append.lua: add lines to a job's log (engine/joblogs.py, docs/admin.md "Job
-- logs"), kept in the queue's `logs` HASH under the job's id, so that the scripts that
-- drop a job's history entry (_history.lua), delete it (delete.lua) or sweep logs whose
-- job is gone (scan.lua) drop its log by id, without a key per job.
--
-- A log's value: 'ZL1', its line count and the lines dropped so far (each 8 hex
--   digits), then its lines oldest first, each its byte length (8 hex digits) and its
--   bytes (what the caller packed: engine/joblogs.py reads them).
-- KEYS[1] logs HASH
-- ARGV[1] the job's id   ARGV[2] max_lines (the most lines kept: the oldest past it are
--   dropped, and counted)   ARGV[3..] the lines to add, oldest first (at least one)
-- Raises ZQ_BAD_ARGUMENT (nothing written) for a missing id or lines, or a max_lines
--   that is not an integer >= 1; a `logs` of another type fails the HGET, before any
--   write. A value that is not a log (corrupt) is replaced by the new lines.
-- Returns: {lines kept, lines dropped in all, 1 when a corrupt value was replaced else 0}
-- Work: O(lines dropped in this call + bytes of the log): one HGET, one HSET.

--@include bounds

local logs, id, max = KEYS[1], ARGV[1], tonumber(ARGV[2])
local n = #ARGV - 2
if not logs or not id or id == '' or not is_int(max, 1, MAX_EXACT) or n < 1 then
  error('ZQ_BAD_ARGUMENT: log_append takes the logs key, a job id, max_lines >= 1 and lines')
end

local HEADER = 'ZL1'
local old = redis.call('HGET', logs, id)
local count, dropped, body, corrupt = 0, 0, '', 0
if old then
  if string.find(old, '^ZL1' .. string.rep('%x', 16)) then
    count = tonumber(string.sub(old, 4, 11), 16)
    dropped = tonumber(string.sub(old, 12, 19), 16)
    body = string.sub(old, 20)
  else
    corrupt = 1
  end
end

-- the lines past max_lines, oldest first: the old ones, then (more than max new ones)
-- the oldest new ones
local cut = count + n - max
local first = 1 -- the first new line kept
if cut > 0 then
  local cut_old = math.min(cut, count)
  local pos = 1
  for _ = 1, cut_old do
    local len = tonumber(string.sub(body, pos, pos + 7), 16)
    if not len or pos + 8 + len > #body + 1 then -- a corrupt frame: no old line is kept
      pos, corrupt = #body + 1, 1
      break
    end
    pos = pos + 8 + len
  end
  if corrupt == 1 then
    dropped, cut_old = dropped + count, count
    count, body = 0, ''
  else
    body = string.sub(body, pos)
    count = count - cut_old
    dropped = dropped + cut_old
  end
  if n > max then
    first = n - max + 1
    dropped = dropped + (first - 1)
  end
end

local parts = {}
for i = first, n do
  local line = ARGV[i + 2]
  parts[#parts + 1] = string.format('%08x', #line) .. line
end
count = count + (n - first + 1)
redis.call('HSET', logs, id,
  HEADER .. string.format('%08x%08x', count, dropped) .. body .. table.concat(parts))
return {count, dropped, corrupt}
