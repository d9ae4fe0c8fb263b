-- ARGV: pid, mh, name, json.  Stored as a declaration; grants nothing.
local pid, mh = ARGV[2], ARGV[3]
if redis.call('SISMEMBER', K('proj', pid, 'members'), mh) == 0 then return fail('refused', 'the member is not in the project') end
redis.call('HSET', K('proj', pid, 'sources'), ARGV[4], ARGV[5])
return 1
