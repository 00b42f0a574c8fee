-- _job_options.lua: generated from django_zqueue/conf/bounds.py (never edit a copy):
-- the names of a job's options in the job map (JobSpec's fields). JOB_OPTIONS: those
-- every publish takes (read_job, _new_job.lua), each true (a text) or the bounds of a
-- number, {lowest, highest, integer only} (JOB_BOUNDS, as bound(name) gives them);
-- ONCE_OPTIONS: those publish_once takes on top; PROTOCOL_OPTIONS: what a producer of
-- wire protocol 1 may give (proto_publish.lua, docs/protocol.md).
local JOB_OPTIONS = {
  priority = {-1000, 1000, true},
  score = {-9007199254740992, 9007199254740992, false},
  delay_ms = {-9007199254740992, 315360000000, true},
  run_at_ms = {0, 9007199254740992, true},
  max_retries = {0, 1000, true},
  visibility_timeout_ms = {1000, 604800000, true},
  group = true,
  weight = {0.001, 1000, false},
  expires_in_ms = {1, 315360000000, true},
  expires_at_ms = {0, 9007199254740992, true},
  ordering_key = true,
  on_dead = true,
}
local ONCE_OPTIONS = {
  debounce_ms = true,
  unique_ms = true,
}
local PROTOCOL_OPTIONS = {
  id = true,
  priority = true,
  delay_ms = true,
  run_at_ms = true,
  max_retries = true,
  visibility_timeout_ms = true,
  group = true,
  weight = true,
  expires_in_ms = true,
  expires_at_ms = true,
}
