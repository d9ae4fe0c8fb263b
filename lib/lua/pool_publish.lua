local id, tok = ARGV[2], ARGV[3]
local h = redis.call('HMGET', W(id), 'state', 'token')
if h[1] ~= 'resetting' or h[2] ~= tok or ep_of(tok) ~= EP then
  return fail('stale_token', 'reset token does not match')
end
move(id, 'resetting', 'warm', now())
redis.call('HSET', W(id), 'gen', ARGV[4], 'clean', tok)
redis.call('HDEL', W(id), 'wskey')
return done(opid, {worker = id, state = 'warm'})
