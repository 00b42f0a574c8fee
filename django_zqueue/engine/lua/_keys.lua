-- _keys.lua: a script's KEYS by role (engine/keys.py SCRIPT_ROLES, the same list).
--
-- key_roles(keys, roles): a table role -> key of `keys` (the script's KEYS), whose first
--   #roles entries are the keys of `roles` (names of engine/keys.py KEY_TYPES), in that
--   order, so a script says K.expired, not KEYS[12]. Raises ZQ_BAD_ARGUMENT when a key is
--   missing; call it before the first write. Which key stands for which role is the call
--   builder's (engine/shard.py, by SCRIPT_ROLES): tests/test_key_roles.py checks every
--   builder's KEYS against their roles, so a call does not pay for it.
local function key_roles(keys, roles)
  if #keys < #roles then
    error('ZQ_BAD_ARGUMENT: ' .. #roles .. ' KEYS by role expected (' .. table.concat(roles, ', ')
      .. '), got ' .. #keys)
  end
  local K = {}
  for i = 1, #roles do
    K[roles[i]] = keys[i]
  end
  return K
end
