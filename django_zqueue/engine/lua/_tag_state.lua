-- _tag_state.lua:
-- tag_state: the state of a tag already in use: ready | delayed | leased | dead |
--   waiting (when k.wait is given) | expired (when k.expired is given) | unknown (a record in no set), or nil when the tag is
--   free. Reads no record.
-- tags_in_use: for the ids of one publish call, nil when every one is free, else
--   {1, id, state, id, state, ...} for those in use (state as tag_state gives it, or
--   'batch' for an id listed twice in the call): one HMGET for all, then the state of
--   each one in use only.

local function tag_state(k, id)
  if redis.call('HEXISTS', k.meta, id) == 0 then
    return nil
  end
  for _, name in ipairs({'ready', 'delayed', 'leased', 'dead'}) do
    if redis.call('ZSCORE', k[name], id) then
      return name
    end
  end
  if k.wait and redis.call('ZSCORE', k.wait, id) then
    return 'waiting'
  end
  if k.expired and redis.call('ZSCORE', k.expired, id) then
    return 'expired'
  end
  return 'unknown'
end

local function tags_in_use(k, ids)
  local found = redis.call('HMGET', k.meta, unpack(ids))
  local clash, seen = {}, {}
  for i, id in ipairs(ids) do
    if seen[id] then
      clash[#clash + 1] = id
      clash[#clash + 1] = 'batch'
    elseif found[i] then
      clash[#clash + 1] = id
      clash[#clash + 1] = tag_state(k, id) or 'unknown'
    end
    seen[id] = true
  end
  if #clash == 0 then
    return nil
  end
  table.insert(clash, 1, 1)
  return clash
end
