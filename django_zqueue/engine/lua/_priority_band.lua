-- _priority_band.lua: strict mode score = seq - priority * 2^42 (a priority's band).
local PRIORITY_BAND = 4398046511104 -- 2^42
