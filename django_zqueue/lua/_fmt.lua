-- _fmt.lua: a score as a string Redis parses back exactly (Lua's own tostring keeps 14
-- digits).
local function fmt(x)
  return string.format('%.17g', x)
end
