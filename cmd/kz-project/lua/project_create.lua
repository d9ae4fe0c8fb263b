local pid, mh = ARGV[2], ARGV[3]
if not ismember(mh) then return fail('refused', 'unknown member') end
if exists(K('proj', pid)) then return fail('refused', 'project exists') end
redis.call('HSET', K('proj', pid), 'owner', mh)
redis.call('SADD', K('proj', pid, 'members'), mh)
return 1
