-- The helpers every kz-project store script starts with (after
-- lib/lua/kz.lua, whose fail() is the one refusal convention; model.c
-- prepends both at build time).  Every key is "kz:{dep}:..." (ARGV[1] is
-- that prefix, KEYS[1] the same string so a cluster routes the script to
-- the slot of the hash tag).  Every change to who can see a room bumps the
-- room's audience version ("aver") in the same script, so no reader can
-- see the new roster with the old version.  A room's roster is read once
-- per script call and kept for the rest of it (a view asks for it once per
-- linked file); no script changes a roster after reading it.
--
-- Layout:
--   member:M                 exists once the member is created
--   room:R                   hash owner, aver, seq (admission sequence)
--   room:R:members           set of direct members
--   room:R:projects          set of projects the chat is linked to
--   room:R:links             hash rid -> {by, turn, seq, shared}
--   room:R:sel               hash rid -> owner (private-library selections)
--   room:R:scope:M           set of rids resolved for M in this chat
--   proj:P                   hash owner
--   proj:P:members, :rooms   sets
--   proj:P:links             hash rid -> {by, turn, seq, shared}
--   proj:P:sources           hash name -> declared source (inert)
--   conn:C                   hash bucket (a platform-managed connection)
--   conn:C:members, :projects  sets of members and projects it serves
--   res:I                    hash owner, kind, revoked, cur[, conn, obj]
--   res:I:v:N                hash path, size, sha, ready
--   res:I:in                 set of "r:R" / "p:P" where I is linked
--   snap:S                   an admission snapshot (JSON, with a TTL)
-- M and R are keyed hashes of the raw member and room ids.
local P = ARGV[1]
local function K(...) return P .. table.concat({...}, ':') end
local function ismember(m) return redis.call('EXISTS', K('member', m)) == 1 end
local function exists(k) return redis.call('EXISTS', k) == 1 end
local rosters = {}
local function rosterset(rh)
  if rosters[rh] then return rosters[rh] end
  local set = {}
  for _, m in ipairs(redis.call('SMEMBERS', K('room', rh, 'members'))) do set[m] = true end
  for _, p in ipairs(redis.call('SMEMBERS', K('room', rh, 'projects'))) do
    for _, m in ipairs(redis.call('SMEMBERS', K('proj', p, 'members'))) do set[m] = true end
  end
  rosters[rh] = set
  return set
end
local function roster(rh)
  local out = {}
  for m in pairs(rosterset(rh)) do out[#out + 1] = m end
  table.sort(out)
  return out
end
local function inroster(rh, m) return rosterset(rh)[m] == true end
local function bump(rh) return redis.call('HINCRBY', K('room', rh), 'aver', 1) end
local function aver(rh) return tonumber(redis.call('HGET', K('room', rh), 'aver')) end
-- Adds (on == '1') or removes member mh to or from the members of
-- K(kind, id): 1 when the set changed, else 0; or nil and the refusal when
-- the member or the target (named by unknown) does not exist.
local function enrol(kind, id, mh, on, unknown)
  if not ismember(mh) then return nil, fail('refused', 'unknown member') end
  if not exists(K(kind, id)) then return nil, fail('refused', unknown) end
  if on == '1' then return redis.call('SADD', K(kind, id, 'members'), mh) end
  return redis.call('SREM', K(kind, id, 'members'), mh)
end
