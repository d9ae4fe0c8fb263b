-- The pool's helpers, prepended (after kz.lua) to every transition script
-- of lib/pool.c.  KEYS[1] is the deployment prefix "kz:{dep}:"; every key
-- the scripts touch starts with it, so all of them share one hash tag (one
-- cluster slot).  Each script checks state and token before its first
-- write (the refusal convention of kz.lua).
local P = KEYS[1]
-- The caller's host (LEASE_HOST), which lib appends to every pool script's
-- arguments (kz_pool_scope).  Workers of a local controller are reachable
-- only on their host, so each host has its own state sets, expiry set and
-- capacity; a worker's record names its host ("ctl"), and a transition by
-- worker id moves it within that host's sets, whoever calls.  The empty
-- scope keeps the single-host layout.  Member counts, lease ids, the
-- token counter and the epoch are the deployment's, shared by all hosts.
local SC = table.remove(ARGV)
local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function W(id) return P .. 'w:' .. id end
local function S(st, sc)
  sc = sc or SC
  if sc == '' then return P .. 's:' .. st end
  return P .. 's:' .. sc .. ':' .. st
end
local function X(sc)
  sc = sc or SC
  if sc == '' then return P .. 'exp' end
  return P .. 'x:' .. sc .. ':exp'
end
local function SOF(id) return redis.call('HGET', W(id), 'ctl') or '' end
local STATES = {'creating', 'warm', 'leased', 'resetting', 'retiring',
  'deleting'}
local function ep_of(tok) return string.match(tok or '', '^([^:]*):') end
local function newtok(ep) return ep .. ':' .. redis.call('INCR', P .. 'tok') end
local function move(id, from, to, t)
  local sc = SOF(id)
  redis.call('SREM', S(from, sc), id)
  redis.call('SADD', S(to, sc), id)
  redis.call('HSET', W(id), 'state', to, 'since', t)
end
local function unlease(id)
  local h = redis.call('HMGET', W(id), 'lease', 'owner')
  if h[1] then redis.call('DEL', P .. 'l:' .. h[1]) end
  if h[2] then
    if redis.call('HINCRBY', P .. 'members', h[2], -1) <= 0 then
      redis.call('HDEL', P .. 'members', h[2])
    end
  end
  redis.call('ZREM', X(SOF(id)), id)
  redis.call('HDEL', W(id), 'lease', 'owner', 'expires', 'rid')
end
local function forget(id, st)
  local sc = SOF(id)
  if st == 'leased' then unlease(id) end
  redis.call('SREM', S(st, sc), id)
  redis.call('DEL', W(id))
end
