-- _park_member.lua: park_member, the gpark entry of a job set aside by its group's limit
-- (_group_limits.lua): "<group>\0<order>\0<score>\0<run-at>\0<id>", where <order> is the
-- score made to sort as text and <run-at> the job's score in delayed. set_priority.lua
-- builds it again to move a job set aside.

local function park_member(group, score, run_at, id)
  local order = string.format('%020.3f', tonumber(score) + 2251799813685248) -- + 2^51
  return group .. '\0' .. order .. '\0' .. score .. '\0' .. run_at .. '\0' .. id
end
