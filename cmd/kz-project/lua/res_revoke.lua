-- ARGV: rid, mh.
local rid, mh = ARGV[2], ARGV[3]
local o = redis.call('HGET', K('res', rid), 'owner')
if not o then return fail('refused', 'unknown resource') end
if o ~= mh then return fail('not_owner', 'only the owner may revoke') end
redis.call('HSET', K('res', rid), 'revoked', 1)
return 1
