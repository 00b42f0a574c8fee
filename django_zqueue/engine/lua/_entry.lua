-- _entry.lua: one entry of a script's list of entries, each one argument: a MessagePack
-- map whose fields are read by name (made by django_zqueue/engine/scripts' entry_arg, as
-- a job travels in _new_job.lua's map), so no script reads its arguments by stride.
-- entry(raw): the decoded map, or nil when `raw` is not one.
local function entry(raw)
  if type(raw) ~= 'string' or raw == '' then
    return nil
  end
  local ok, t = pcall(cmsgpack.unpack, raw)
  if ok and type(t) == 'table' then
    return t
  end
  return nil
end
