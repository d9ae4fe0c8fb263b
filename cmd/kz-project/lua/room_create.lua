local rh, mh = ARGV[2], ARGV[3]
if not ismember(mh) then return fail('refused', 'unknown member') end
if exists(K('room', rh)) then return fail('refused', 'room exists') end
redis.call('HSET', K('room', rh), 'owner', mh, 'aver', 1, 'seq', 0)
redis.call('SADD', K('room', rh, 'members'), mh)
return 1
