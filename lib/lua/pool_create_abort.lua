local id, tok = ARGV[2], ARGV[3]
local h = redis.call('HMGET', W(id), 'state', 'token')
if h[1] ~= 'creating' or h[2] ~= tok then
  return fail('stale_token', 'worker is not being created under this token')
end
forget(id, 'creating')
return done(opid, {id = id, state = 'absent'})
