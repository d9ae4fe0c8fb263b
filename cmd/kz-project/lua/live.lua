-- ARGV: rh, mh, extra rids, sid.  What verification decides on: the view
-- and the stored snapshot, read atomically in one round trip (the stored
-- copy is returned as stored, never re-encoded, so it compares exactly).
-- Replies {view} when no such snapshot is stored.
local v = cjson.encode(view(ARGV[2], ARGV[3], ARGV[4]))
local s = redis.call('GET', K('snap', ARGV[5]))
if not s then return {v} end
return {v, s}
