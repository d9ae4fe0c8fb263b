-- ARGV: rid, mh, rh, turn, name, size, sha, the three bounds, dry.  A
-- shared-turn output: its resource, its one version and its shared link
-- to exactly room rh, made in one script once the output takes its place
-- by the place rule (place_fn), so a refused output leaves nothing
-- behind.  dry "1" checks and writes nothing: link-output asks before it
-- audits the decision, and this script checks again as it writes.
local rid, mh, rh, turn, name, size = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
if not ismember(mh) then return fail('refused', 'unknown member') end
if not exists(K('room', rh)) then return fail('refused', 'unknown room') end
if not inroster(rh, mh) then return fail('refused', "the member is no longer in the room's audience") end
if exists(K('res', rid)) then return fail('refused', 'resource exists') end
local no = place(rh, rid, mh, name, tonumber(size) or 0, bounds(9))
if no then return no end
if ARGV[12] == '1' then return 0 end
redis.call('HSET', K('res', rid), 'owner', mh, 'kind', 'output', 'cur', 1, 'revoked', 0)
redis.call('HSET', K('res', rid, 'v', 1), 'path', name, 'size', size, 'sha', ARGV[8], 'ready', 1)
local seq = redis.call('HINCRBY', K('room', rh), 'seq', 1)
redis.call('HSET', K('room', rh, 'links'), rid, cjson.encode({by = mh, turn = turn, seq = seq, shared = true}))
redis.call('SADD', K('res', rid, 'in'), 'r:' .. rh)
return seq
