-- ARGV: rh, mh, "1" join / "0" leave.
local rh, mh, on = ARGV[2], ARGV[3], ARGV[4]
if not ismember(mh) then return fail('refused', 'unknown member') end
if not exists(K('room', rh)) then return fail('refused', 'unknown room') end
local ch
if on == '1' then ch = redis.call('SADD', K('room', rh, 'members'), mh)
else ch = redis.call('SREM', K('room', rh, 'members'), mh) end
if ch == 1 then return bump(rh) end
return aver(rh)
