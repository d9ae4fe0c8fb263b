-- ARGV: rid, mh, path, size, sha, ready.  Only the owner writes.
local rid, mh = ARGV[2], ARGV[3]
local h = redis.call('HMGET', K('res', rid), 'owner', 'revoked')
if not h[1] then return fail('refused', 'unknown resource') end
if h[1] ~= mh then return fail('not_owner', 'only the owner may add a version') end
if h[2] == '1' then return fail('refused', 'resource revoked') end
local v = redis.call('HINCRBY', K('res', rid), 'cur', 1)
redis.call('HSET', K('res', rid, 'v', v), 'path', ARGV[4], 'size', ARGV[5], 'sha', ARGV[6], 'ready', ARGV[7])
return v
