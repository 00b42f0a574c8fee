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

-- key_roles_built(keys, n, K, names): what a script's key_roles(KEYS, {...}) line becomes
--   in the text the server runs (engine/scripts/source.py script_text): K is the table
--   role -> KEYS[i] built from the line's role list when the library was built, so a
--   call pays for one table of its keys and the count check, not for the list. Raises
--   ZQ_BAD_ARGUMENT, as key_roles, when `keys` holds fewer than `n` keys (`names` lists
--   the roles for the message).
local function key_roles_built(keys, n, K, names)
  if #keys < n then
    error('ZQ_BAD_ARGUMENT: ' .. n .. ' KEYS by role expected (' .. names .. '), got ' .. #keys)
  end
  return K
end
