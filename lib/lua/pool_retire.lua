local id, tok = ARGV[2], ARGV[3]
local h = redis.call('HMGET', W(id), 'state', 'token')
if not h[1] then return fail('not_found', 'no such worker') end
if h[2] ~= tok or h[1] == 'retiring' or h[1] == 'deleting' then
  return fail('stale_token', 'token does not match')
end
local rt = newtok(EP)
if h[1] == 'leased' then unlease(id) end
move(id, h[1], 'retiring', now())
redis.call('HSET', W(id), 'token', rt, 'why', ARGV[4])
return done(opid, {worker = id, state = 'retiring', token = rt})
