-- _tag_state.lua: the state of a tag already in use: ready | delayed | leased | dead |
-- waiting (when k.wait is given) | unknown (a record in no set), or nil when the tag is
-- free. Reads no record.

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
  return 'unknown'
end
