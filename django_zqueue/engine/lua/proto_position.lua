-- proto_position.lua (read-only): zq1_position, wire protocol 1 (docs/protocol.md):
-- where one job stands, as positions.lua reads it.
--
-- KEYS[1] .. KEYS[6] positions.lua's keys in its order, each {<prefix>:<queue>}:<name>:
--   ready delayed leased dead wait expired
-- ARGV[1] protocol version ('1')   ARGV[2] the job's id
-- Raises ZQ_PROTOCOL: another protocol version, keys that are not one queue's in this
--   order; ZQ_BAD_ARGUMENT: no id.
-- Returns: {'ready', rank, score} (rank 0 is claimed next; score as a string); else {state}:
--   delayed, leased, dead, waiting (for its parents), expired, or '' (no such job).
-- Work: O(log N).

local NAMES = {'ready', 'delayed', 'leased', 'dead', 'wait', 'expired'}
local STATES = {[-1] = 'delayed', [-2] = 'leased', [-3] = 'dead', [-4] = '', [-5] = 'waiting',
  [-6] = 'expired'}

if ARGV[1] ~= '1' then
  error('ZQ_PROTOCOL: unknown protocol version ' .. tostring(ARGV[1]) .. '; this server speaks 1')
end
if #KEYS ~= #NAMES or #ARGV ~= 2 then
  error('ZQ_PROTOCOL: zq1_position takes 6 keys and 2 arguments (docs/protocol.md)')
end
local tag = string.match(KEYS[1], '^({.+}):ready$')
for i, name in ipairs(NAMES) do
  if not tag or KEYS[i] ~= tag .. ':' .. name then
    error('ZQ_PROTOCOL: KEYS[' .. i .. '] must be {<prefix>:<queue>}:' .. name)
  end
end
if ARGV[2] == '' then
  error('ZQ_BAD_ARGUMENT: zq1_position needs a job id')
end

local out = positions_core(KEYS, {ARGV[2]})
if out[1] >= 0 then
  return {'ready', out[1], out[2]}
end
return {STATES[out[1]]}
