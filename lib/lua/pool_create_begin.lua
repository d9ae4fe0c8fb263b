local id, cap = ARGV[2], tonumber(ARGV[3])
if redis.call('EXISTS', W(id)) == 1 then
  return fail('exists', 'worker id already recorded')
end
local n = 0
for _, st in ipairs(STATES) do n = n + redis.call('SCARD', S(st)) end
if n >= cap then return fail('capacity', 'pool is at capacity') end
local t = now()
local tok = newtok(EP)
redis.call('HSET', W(id), 'state', 'creating', 'token', tok, 'since', t,
  'created', t, 'ctl', SC)
redis.call('SADD', S('creating'), id)
return done(opid, {id = id, token = tok})
