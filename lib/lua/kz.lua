-- The helper every kz store script starts with (lib/pool.c and
-- kz-project prepend this file at build time; see the Makefile).
--
-- The one refusal convention.  A script refuses by returning
-- fail(code, reason): the JSON string {"err":CODE,"reason":REASON}, where
-- CODE is a wire code (kz_wire.h) or a code its caller maps to one, and
-- REASON is one line for the operator.  A script refuses before its first
-- write, because a Lua error does not undo earlier writes: a refusal means
-- nothing was written.  Anything else the script returns (an integer, a
-- JSON object without "err", an array) is its result.  C reads a refusal
-- in one place, kz_store_refusal() (lib/store.c).
local function fail(code, reason)
  return cjson.encode({err = code, reason = reason})
end
