-- _keys.lua: a script's KEYS by role (engine/keys.py SCRIPT_ROLES, the same list).
--
-- key_roles(keys, roles): a table role -> key of `keys` (the script's KEYS), whose first
--   #roles entries are the keys of `roles` (names of engine/keys.py KEY_TYPES), in that
--   order, so a script says K.expired, not KEYS[12]. Each key must be named
--   '<tag>:<role>' with one tag for all: raises ZQ_BAD_ARGUMENT otherwise (a missing
--   key, one out of place); call it before the first write.
local function key_roles(keys, roles)
  local K = {}
  local tag
  for i = 1, #roles do
    local key, role = keys[i], roles[i]
    local t = type(key) == 'string' and string.sub(key, -#role - 1) == ':' .. role
      and string.sub(key, 1, -#role - 2)
    if not t or (tag and t ~= tag) then
      error('ZQ_BAD_ARGUMENT: KEYS[' .. i .. '] must be the ' .. role .. ' key, got '
        .. tostring(key))
    end
    tag = t
    K[role] = key
  end
  return K
end
