-- Mutating scripts: answer a retried op id from its stored result, and
-- refuse to run on a store that has lost its epoch.  OPNAME, the script's
-- name, is set by lib/pool.c just before this file.
--
-- A stored result answers only the request that produced it: it is kept
-- with a fingerprint of the script's name and every argument (the scope
-- included), each part length-prefixed so that no two different requests
-- join to the same string.  The same op id with any other request is
-- refused, never answered, so an op id alone cannot fetch another
-- caller's result; so is a result stored without a fingerprint (by an
-- older version), whose request cannot be told.
local opid = ARGV[1]
local function opfp()
  local b = {#OPNAME .. ':' .. OPNAME, #SC .. ':' .. SC}
  for i = 1, #ARGV do b[#b + 1] = #ARGV[i] .. ':' .. ARGV[i] end
  return redis.sha1hex(table.concat(b))
end
local FP = opid ~= '' and opfp() or ''
-- Whether lease lid still names worker id, leased under tok, unexpired.
local function holds(lid, id, tok)
  if type(lid) ~= 'string' or type(id) ~= 'string' or
      redis.call('GET', P .. 'l:' .. lid) ~= id then
    return false
  end
  local h = redis.call('HMGET', W(id), 'state', 'token', 'expires')
  return h[1] == 'leased' and h[2] == tok and tonumber(h[3] or '0') > now()
end
-- A lease or renew is answered again only while that lease holds: its
-- stored answer names a worker, endpoint and token that may since have
-- gone to another owner.
local STILL = {
  lease = function(r) return holds(r.lease_id, r.worker, r.token) end,
  renew = function(r) return holds(ARGV[2], r.worker, ARGV[3]) end,
}
local function done(op, res)
  local s = cjson.encode(res)
  if op ~= '' then
    redis.call('SET', P .. 'op:' .. op, '{"fp":"' .. FP .. '","res":' ..
      s .. '}', 'PX', 600000)
  end
  return s
end
if opid ~= '' then
  local prev = redis.call('GET', P .. 'op:' .. opid)
  if prev then
    local ok, st = pcall(cjson.decode, prev)
    if not ok or type(st) ~= 'table' or st.fp ~= FP or
        type(st.res) ~= 'table' then
      return fail('bad_request', 'op id already used by another request')
    end
    local still = STILL[OPNAME]
    if still and not still(st.res) then
      return fail('stale_token', 'lease has ended')
    end
    st.res.replay = true
    return cjson.encode(st.res)
  end
end
local EP = redis.call('GET', P .. 'epoch')
if not EP then
  return fail('store_unavailable', 'store has no epoch (lost its data)')
end
