local id, tok = ARGV[2], ARGV[3]
local h = redis.call('HMGET', W(id), 'state', 'token')
if (h[1] ~= 'retiring' and h[1] ~= 'deleting') or h[2] ~= tok then
  return fail('stale_token', 'worker is not being deleted under this token')
end
forget(id, h[1])
return done(opid, {worker = id, state = 'absent'})
