-- The pool's helpers, prepended (after kz.lua) to every transition script
-- of lib/pool.c.  KEYS[1] is the deployment prefix "kz:{dep}:"; every key
-- the scripts touch starts with it, so all of them share one hash tag (one
-- cluster slot).  Each script checks state and token before its first
-- write (the refusal convention of kz.lua).
local P = KEYS[1]
local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function W(id) return P .. 'w:' .. id end
local function S(st) return P .. 's:' .. st end
local STATES = {'creating', 'warm', 'leased', 'resetting', 'retiring',
  'deleting'}
local function ep_of(tok) return string.match(tok or '', '^([^:]*):') end
local function newtok(ep) return ep .. ':' .. redis.call('INCR', P .. 'tok') end
local function move(id, from, to, t)
  redis.call('SREM', S(from), id)
  redis.call('SADD', S(to), id)
  redis.call('HSET', W(id), 'state', to, 'since', t)
end
local function done(opid, res)
  local s = cjson.encode(res)
  if opid ~= '' then
    redis.call('SET', P .. 'op:' .. opid, s, 'PX', 600000)
  end
  return s
end
local function unlease(id)
  local h = redis.call('HMGET', W(id), 'lease', 'owner')
  if h[1] then redis.call('DEL', P .. 'l:' .. h[1]) end
  if h[2] then
    if redis.call('HINCRBY', P .. 'members', h[2], -1) <= 0 then
      redis.call('HDEL', P .. 'members', h[2])
    end
  end
  redis.call('ZREM', P .. 'exp', id)
  redis.call('HDEL', W(id), 'lease', 'owner', 'expires', 'rid')
end
local function forget(id, st)
  if st == 'leased' then unlease(id) end
  redis.call('SREM', S(st), id)
  redis.call('DEL', W(id))
end
