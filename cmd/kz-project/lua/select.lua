-- ARGV: rh, mh, rid, on.  An owner-scoped selection, not a room link.
local rh, mh, rid, on = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
if not exists(K('room', rh)) then return fail('refused', 'unknown room') end
if on ~= '1' then
  if redis.call('HGET', K('room', rh, 'sel'), rid) ~= mh then return fail('refused', 'no such selection') end
  redis.call('HDEL', K('room', rh, 'sel'), rid)
  return 1
end
local h = redis.call('HMGET', K('res', rid), 'owner', 'kind', 'revoked')
if h[1] ~= mh or h[2] ~= 'library' or h[3] == '1' then
  return fail('refused', 'only a ready file of the member own private library can be selected') end
if redis.call('SISMEMBER', K('room', rh, 'members'), mh) == 0 then return fail('refused', 'the member is not in the chat') end
redis.call('HSET', K('room', rh, 'sel'), rid, mh)
return 1
