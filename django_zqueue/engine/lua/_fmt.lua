-- _fmt.lua: a score as a string Redis parses back exactly (Lua's own tostring keeps 14
-- digits). A whole number below 2^53 in size is written as an integer ('%d': the same
-- digits '%.17g' writes for it, at a fifth of the cost; -0 is written 0); any other
-- number as '%.17g' (NaN and the infinities included).
--@include bounds
local function fmt(x)
  if x % 1 == 0 and x <= MAX_EXACT and x >= -MAX_EXACT then
    return string.format('%d', x)
  end
  return string.format('%.17g', x)
end
