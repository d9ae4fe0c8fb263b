-- Only the owner's current token, before expiry, sends the worker to
-- reset.  A release under a stale token, or of a lease that expired but
-- was not swept yet, retires the worker instead (workers do not check
-- tokens, so a holder of the old endpoint must find nothing there): the
-- result names it with "retired" and carries the refusal for the caller.
local lid, tok = ARGV[2], ARGV[3]
local id = redis.call('GET', P .. 'l:' .. lid)
if not id then return fail('not_owner', 'no such lease') end
local h = redis.call('HMGET', W(id), 'state', 'token', 'wskey', 'endpoint',
  'gen', 'rid', 'expires')
if h[1] ~= 'leased' then
  return fail('stale_token', 'lease token does not match')
end
local t = now()
local why, reason = nil, nil
if h[2] ~= tok then
  why, reason = 'stale_release', 'lease token does not match'
elseif tonumber(h[7] or '0') <= t then
  why, reason = 'expired', 'lease expired'
end
local rt = newtok(EP)
unlease(id)
if why then
  move(id, 'leased', 'retiring', t)
  redis.call('HSET', W(id), 'token', rt, 'why', why)
  return done(opid, {worker = id, retired = why, token = rt,
    refused = 'stale_token', reason = reason, run_id = h[6] or nil})
end
move(id, 'leased', 'resetting', t)
redis.call('HSET', W(id), 'token', rt)
return done(opid, {worker = id, reset_token = rt, wskey = h[3],
  endpoint = h[4], gen = h[5], run_id = h[6] or nil})
