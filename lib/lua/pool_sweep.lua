-- An expired lease retires its worker, never resets it for a new owner:
-- kz-lease deletes it and a replacement is created.
local t = now()
local ids = redis.call('ZRANGEBYSCORE', X(), '-inf', t, 'LIMIT', 0,
  tonumber(ARGV[2]))
local out = {}
for _, id in ipairs(ids) do
  local h = redis.call('HMGET', W(id), 'state', 'rid')
  if h[1] == 'leased' then
    local rt = newtok(EP)
    unlease(id)
    move(id, 'leased', 'retiring', t)
    redis.call('HSET', W(id), 'token', rt, 'why', 'expired')
    out[#out + 1] = {worker = id, token = rt, run_id = h[2] or nil}
  else
    redis.call('ZREM', X(), id)
  end
end
return done(opid, {expired = out, n = #out})
