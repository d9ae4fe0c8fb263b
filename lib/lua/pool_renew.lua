local lid, tok, ttl = ARGV[2], ARGV[3], tonumber(ARGV[4])
local id = redis.call('GET', P .. 'l:' .. lid)
if not id then return fail('not_owner', 'no such lease') end
local h = redis.call('HMGET', W(id), 'state', 'token', 'expires')
if h[1] ~= 'leased' or h[2] ~= tok then
  return fail('stale_token', 'lease token does not match')
end
local t = now()
if tonumber(h[3]) <= t then return fail('stale_token', 'lease expired') end
redis.call('HSET', W(id), 'expires', t + ttl)
redis.call('ZADD', X(SOF(id)), t + ttl, id)
return done(opid, {worker = id, expires_ms = t + ttl, ttl_ms = ttl})
