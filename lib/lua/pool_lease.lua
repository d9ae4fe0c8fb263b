local member, wskey, ttl = ARGV[2], ARGV[3], tonumber(ARGV[4])
local limit, lid, rid = tonumber(ARGV[5]), ARGV[6], ARGV[7]
local cur = tonumber(redis.call('HGET', P .. 'members', member) or '0')
if cur >= limit then
  return fail('member_limit', 'member is at its concurrency limit')
end
if redis.call('EXISTS', P .. 'l:' .. lid) == 1 then
  return fail('bad_request', 'lease id already in use')
end
local id = redis.call('SRANDMEMBER', S('warm'))
if not id then return fail('no_worker', 'no warm worker available') end
local h = redis.call('HMGET', W(id), 'state', 'token', 'endpoint', 'gen',
  'clean')
if h[1] ~= 'warm' or ep_of(h[2]) ~= EP then
  return fail('internal', 'warm set disagrees with a worker record')
end
local t = now()
local tok = newtok(EP)
local exp = t + ttl
move(id, 'warm', 'leased', t)
redis.call('HSET', W(id), 'token', tok, 'owner', member, 'wskey', wskey,
  'lease', lid, 'expires', exp)
if rid and rid ~= '' then redis.call('HSET', W(id), 'rid', rid) end
redis.call('ZADD', X(), exp, id)
redis.call('HINCRBY', P .. 'members', member, 1)
redis.call('SET', P .. 'l:' .. lid, id)
return done(opid, {worker = id, endpoint = h[3], gen = h[4], lease_id = lid,
  token = tok, expires_ms = exp, ttl_ms = ttl,
  clean_token = h[5] or nil})
