/*
 * The store's Lua scripts.  Every key is "kz:{dep}:..." (ARGV[1] is that
 * prefix, KEYS[1] the same string so a cluster routes the script to the
 * slot of the hash tag).  Every change to who can see a room bumps the
 * room's audience version ("aver") in the same script, so no reader can see
 * the new roster with the old version.  Refusals come back as error replies
 * "KZ <code> <reason>".  A room's roster is read once per script call and
 * kept for the rest of it (a view asks for it once per linked file); no
 * script changes a roster after reading it.
 *
 * Layout:
 *   member:M                 exists once the member is created
 *   room:R                   hash owner, aver, seq (admission sequence)
 *   room:R:members           set of direct members
 *   room:R:projects          set of projects the chat is linked to
 *   room:R:links             hash rid -> {by, turn, seq, shared}
 *   room:R:sel               hash rid -> owner (private-library selections)
 *   room:R:scope:M           set of rids resolved for M in this chat
 *   proj:P                   hash owner
 *   proj:P:members, :rooms   sets
 *   proj:P:links             hash rid -> {by, turn, seq, shared}
 *   proj:P:sources           hash name -> declared source (inert)
 *   conn:C                   hash bucket (a platform-managed connection)
 *   conn:C:members, :projects  sets of members and projects it serves
 *   res:I                    hash owner, kind, revoked, cur[, conn, obj]
 *   res:I:v:N                hash path, size, sha, ready
 *   res:I:in                 set of "r:R" / "p:P" where I is linked
 *   snap:S                   an admission snapshot (JSON, with a TTL)
 * M and R are keyed hashes of the raw member and room ids.
 */
#ifndef KZP_SCRIPTS_H
#define KZP_SCRIPTS_H

#define LUA_LIB \
"local P = ARGV[1]\n" \
"local function K(...) return P .. table.concat({...}, ':') end\n" \
"local function fail(c, w) return redis.error_reply('KZ ' .. c .. ' ' .. w) end\n" \
"local function ismember(m) return redis.call('EXISTS', K('member', m)) == 1 end\n" \
"local function exists(k) return redis.call('EXISTS', k) == 1 end\n" \
"local rosters = {}\n" \
"local function rosterset(rh)\n" \
"  if rosters[rh] then return rosters[rh] end\n" \
"  local set = {}\n" \
"  for _, m in ipairs(redis.call('SMEMBERS', K('room', rh, 'members'))) do set[m] = true end\n" \
"  for _, p in ipairs(redis.call('SMEMBERS', K('room', rh, 'projects'))) do\n" \
"    for _, m in ipairs(redis.call('SMEMBERS', K('proj', p, 'members'))) do set[m] = true end\n" \
"  end\n" \
"  rosters[rh] = set\n" \
"  return set\n" \
"end\n" \
"local function roster(rh)\n" \
"  local out = {}\n" \
"  for m in pairs(rosterset(rh)) do out[#out + 1] = m end\n" \
"  table.sort(out)\n" \
"  return out\n" \
"end\n" \
"local function inroster(rh, m) return rosterset(rh)[m] == true end\n" \
"local function bump(rh) return redis.call('HINCRBY', K('room', rh), 'aver', 1) end\n" \
"local function aver(rh) return tonumber(redis.call('HGET', K('room', rh), 'aver')) end\n"

#define LUA_MEMBER_CREATE LUA_LIB \
"if redis.call('SETNX', K('member', ARGV[2]), '1') == 0 then return fail('refused', 'member exists') end\n" \
"return 1\n"

#define LUA_ROOM_CREATE LUA_LIB \
"local rh, mh = ARGV[2], ARGV[3]\n" \
"if not ismember(mh) then return fail('refused', 'unknown member') end\n" \
"if exists(K('room', rh)) then return fail('refused', 'room exists') end\n" \
"redis.call('HSET', K('room', rh), 'owner', mh, 'aver', 1, 'seq', 0)\n" \
"redis.call('SADD', K('room', rh, 'members'), mh)\n" \
"return 1\n"

/* ARGV: rh, mh, "1" join / "0" leave. */
#define LUA_ROOM_MEMBER LUA_LIB \
"local rh, mh, on = ARGV[2], ARGV[3], ARGV[4]\n" \
"if not ismember(mh) then return fail('refused', 'unknown member') end\n" \
"if not exists(K('room', rh)) then return fail('refused', 'unknown room') end\n" \
"local ch\n" \
"if on == '1' then ch = redis.call('SADD', K('room', rh, 'members'), mh)\n" \
"else ch = redis.call('SREM', K('room', rh, 'members'), mh) end\n" \
"if ch == 1 then return bump(rh) end\n" \
"return aver(rh)\n"

#define LUA_PROJECT_CREATE LUA_LIB \
"local pid, mh = ARGV[2], ARGV[3]\n" \
"if not ismember(mh) then return fail('refused', 'unknown member') end\n" \
"if exists(K('proj', pid)) then return fail('refused', 'project exists') end\n" \
"redis.call('HSET', K('proj', pid), 'owner', mh)\n" \
"redis.call('SADD', K('proj', pid, 'members'), mh)\n" \
"return 1\n"

/* ARGV: pid, mh, on.  Every chat linked to the project changes audience. */
#define LUA_PROJECT_MEMBER LUA_LIB \
"local pid, mh, on = ARGV[2], ARGV[3], ARGV[4]\n" \
"if not ismember(mh) then return fail('refused', 'unknown member') end\n" \
"if not exists(K('proj', pid)) then return fail('refused', 'unknown project') end\n" \
"local ch\n" \
"if on == '1' then ch = redis.call('SADD', K('proj', pid, 'members'), mh)\n" \
"else ch = redis.call('SREM', K('proj', pid, 'members'), mh) end\n" \
"if ch == 1 then\n" \
"  for _, rh in ipairs(redis.call('SMEMBERS', K('proj', pid, 'rooms'))) do bump(rh) end\n" \
"end\n" \
"return ch\n"

/* ARGV: rh, pid, mh, on.  Linking a chat to a project widens its audience. */
#define LUA_ROOM_PROJECT LUA_LIB \
"local rh, pid, mh, on = ARGV[2], ARGV[3], ARGV[4], ARGV[5]\n" \
"if not exists(K('room', rh)) then return fail('refused', 'unknown room') end\n" \
"if not exists(K('proj', pid)) then return fail('refused', 'unknown project') end\n" \
"if redis.call('SISMEMBER', K('room', rh, 'members'), mh) == 0 or\n" \
"   redis.call('SISMEMBER', K('proj', pid, 'members'), mh) == 0 then\n" \
"  return fail('refused', 'the member must belong to the chat and the project') end\n" \
"local ch\n" \
"if on == '1' then\n" \
"  ch = redis.call('SADD', K('room', rh, 'projects'), pid)\n" \
"  redis.call('SADD', K('proj', pid, 'rooms'), rh)\n" \
"else\n" \
"  ch = redis.call('SREM', K('room', rh, 'projects'), pid)\n" \
"  redis.call('SREM', K('proj', pid, 'rooms'), rh)\n" \
"end\n" \
"if ch == 1 then return bump(rh) end\n" \
"return aver(rh)\n"

/*
 * ARGV: rid, mh, kind[, conn, object].  A resource bound to a connection
 * names an existing platform-managed connection; nothing else binds it.
 */
#define LUA_RES_CREATE LUA_LIB \
"local rid, mh, kind, conn, obj = ARGV[2], ARGV[3], ARGV[4], ARGV[5] or '', ARGV[6] or ''\n" \
"if not ismember(mh) then return fail('refused', 'unknown member') end\n" \
"if exists(K('res', rid)) then return fail('refused', 'resource exists') end\n" \
"if conn ~= '' and not exists(K('conn', conn)) then return fail('refused', 'unknown connection') end\n" \
"redis.call('HSET', K('res', rid), 'owner', mh, 'kind', kind, 'cur', 0, 'revoked', 0)\n" \
"if conn ~= '' then redis.call('HSET', K('res', rid), 'conn', conn, 'obj', obj) end\n" \
"return 1\n"

/*
 * ARGV: cid, bucket, served member hashes (JSON array), pid or "".  A
 * platform-managed connection: created by the operator, never from a
 * declared source.
 */
#define LUA_CONN_CREATE LUA_LIB \
"local cid, bucket, ms, pid = ARGV[2], ARGV[3], cjson.decode(ARGV[4]), ARGV[5]\n" \
"if exists(K('conn', cid)) then return fail('refused', 'connection exists') end\n" \
"for _, m in ipairs(ms) do if not ismember(m) then return fail('refused', 'unknown member') end end\n" \
"if pid ~= '' and not exists(K('proj', pid)) then return fail('refused', 'unknown project') end\n" \
"redis.call('HSET', K('conn', cid), 'bucket', bucket)\n" \
"for _, m in ipairs(ms) do redis.call('SADD', K('conn', cid, 'members'), m) end\n" \
"if pid ~= '' then redis.call('SADD', K('conn', cid, 'projects'), pid) end\n" \
"return 1\n"

/* ARGV: rid, mh, path, size, sha, ready.  Only the owner writes. */
#define LUA_RES_VERSION LUA_LIB \
"local rid, mh = ARGV[2], ARGV[3]\n" \
"local h = redis.call('HMGET', K('res', rid), 'owner', 'revoked')\n" \
"if not h[1] then return fail('refused', 'unknown resource') end\n" \
"if h[1] ~= mh then return fail('not_owner', 'only the owner may add a version') end\n" \
"if h[2] == '1' then return fail('refused', 'resource revoked') end\n" \
"local v = redis.call('HINCRBY', K('res', rid), 'cur', 1)\n" \
"redis.call('HSET', K('res', rid, 'v', v), 'path', ARGV[4], 'size', ARGV[5], 'sha', ARGV[6], 'ready', ARGV[7])\n" \
"return v\n"

/* ARGV: rid, mh. */
#define LUA_RES_REVOKE LUA_LIB \
"local rid, mh = ARGV[2], ARGV[3]\n" \
"local o = redis.call('HGET', K('res', rid), 'owner')\n" \
"if not o then return fail('refused', 'unknown resource') end\n" \
"if o ~= mh then return fail('not_owner', 'only the owner may revoke') end\n" \
"redis.call('HSET', K('res', rid), 'revoked', 1)\n" \
"return 1\n"

/*
 * ARGV: rid, mh, "room"|"project", target, turn, shared.  Only the owner
 * links (a project grant is no re-share authority).  A room link takes the
 * next value of the room's sequence, so verify can tell a link the running
 * turn made after its admission point from every other change.
 */
#define LUA_LINK LUA_LIB \
"local rid, mh, tk, tg, turn, sh = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7] == '1'\n" \
"local h = redis.call('HMGET', K('res', rid), 'owner', 'kind', 'revoked')\n" \
"if not h[1] then return fail('refused', 'unknown resource') end\n" \
"if h[3] == '1' then return fail('refused', 'resource revoked') end\n" \
"if h[1] ~= mh then return fail('not_owner', 'only the owner may link or re-share an item') end\n" \
"if h[2] == 'library' then return fail('refused', 'a private-library file binds to a chat as a selection, never as a link') end\n" \
"if tk == 'room' then\n" \
"  if not exists(K('room', tg)) then return fail('refused', 'unknown room') end\n" \
"  if not inroster(tg, mh) then return fail('refused', 'the member cannot see the room') end\n" \
"  local seq = redis.call('HINCRBY', K('room', tg), 'seq', 1)\n" \
"  redis.call('HSET', K('room', tg, 'links'), rid, cjson.encode({by = mh, turn = turn, seq = seq, shared = sh}))\n" \
"  redis.call('SADD', K('res', rid, 'in'), 'r:' .. tg)\n" \
"  return seq\n" \
"end\n" \
"if redis.call('SISMEMBER', K('proj', tg, 'members'), mh) == 0 then return fail('refused', 'the member is not in the project') end\n" \
"redis.call('HSET', K('proj', tg, 'links'), rid, cjson.encode({by = mh, turn = turn, seq = 0, shared = sh}))\n" \
"redis.call('SADD', K('res', rid, 'in'), 'p:' .. tg)\n" \
"return 0\n"

/* ARGV: rid, mh, "room"|"project", target. */
#define LUA_WITHDRAW LUA_LIB \
"local rid, mh, tk, tg = ARGV[2], ARGV[3], ARGV[4], ARGV[5]\n" \
"local lk = tk == 'room' and K('room', tg, 'links') or K('proj', tg, 'links')\n" \
"local l = redis.call('HGET', lk, rid)\n" \
"if not l then return fail('refused', 'no such link') end\n" \
"local rec = cjson.decode(l)\n" \
"if rec.by ~= mh and redis.call('HGET', K('res', rid), 'owner') ~= mh then\n" \
"  return fail('not_owner', 'only the linking member or the owner may withdraw') end\n" \
"redis.call('HDEL', lk, rid)\n" \
"redis.call('SREM', K('res', rid, 'in'), (tk == 'room' and 'r:' or 'p:') .. tg)\n" \
"return 1\n"

/* ARGV: rh, mh, rid, on.  An owner-scoped selection, not a room link. */
#define LUA_SELECT LUA_LIB \
"local rh, mh, rid, on = ARGV[2], ARGV[3], ARGV[4], ARGV[5]\n" \
"if not exists(K('room', rh)) then return fail('refused', 'unknown room') end\n" \
"if on ~= '1' then\n" \
"  if redis.call('HGET', K('room', rh, 'sel'), rid) ~= mh then return fail('refused', 'no such selection') end\n" \
"  redis.call('HDEL', K('room', rh, 'sel'), rid)\n" \
"  return 1\n" \
"end\n" \
"local h = redis.call('HMGET', K('res', rid), 'owner', 'kind', 'revoked')\n" \
"if h[1] ~= mh or h[2] ~= 'library' or h[3] == '1' then\n" \
"  return fail('refused', 'only a ready file of the member own private library can be selected') end\n" \
"if redis.call('SISMEMBER', K('room', rh, 'members'), mh) == 0 then return fail('refused', 'the member is not in the chat') end\n" \
"redis.call('HSET', K('room', rh, 'sel'), rid, mh)\n" \
"return 1\n"

/* ARGV: pid, mh, name, json.  Stored as a declaration; grants nothing. */
#define LUA_DECLARE_SOURCE LUA_LIB \
"local pid, mh = ARGV[2], ARGV[3]\n" \
"if redis.call('SISMEMBER', K('proj', pid, 'members'), mh) == 0 then return fail('refused', 'the member is not in the project') end\n" \
"redis.call('HSET', K('proj', pid, 'sources'), ARGV[4], ARGV[5])\n" \
"return 1\n"

/* Whether connection c serves member mh now (directly or by project). */
#define LUA_FACTS_FN \
"local function serves(c, mh)\n" \
"  if not exists(K('conn', c)) then return false end\n" \
"  if redis.call('SISMEMBER', K('conn', c, 'members'), mh) == 1 then return true end\n" \
"  for _, p in ipairs(redis.call('SMEMBERS', K('conn', c, 'projects'))) do\n" \
"    if redis.call('SISMEMBER', K('proj', p, 'members'), mh) == 1 then return true end\n" \
"  end\n" \
"  return false\n" \
"end\n" \
"local function facts(rid, mh)\n" \
"  local h = redis.call('HMGET', K('res', rid), 'owner', 'kind', 'revoked', 'cur', 'conn')\n" \
"  if not h[1] then return {id = rid, exists = false} end\n" \
"  local f = {id = rid, exists = true, owner = h[1], kind = h[2], revoked = (h[3] == '1'),\n" \
"             cur = tonumber(h[4] or '0'), grants = {}}\n" \
"  if h[5] and h[5] ~= '' then f.conn = h[5]; f.conn_ok = serves(h[5], mh) end\n" \
"  if f.cur > 0 then\n" \
"    local v = redis.call('HMGET', K('res', rid, 'v', f.cur), 'path', 'size', 'sha', 'ready')\n" \
"    f.path = v[1]; f.size = tonumber(v[2]); f.sha = v[3]; f.ready = (v[4] == '1')\n" \
"  end\n" \
"  for _, e in ipairs(redis.call('SMEMBERS', K('res', rid, 'in'))) do\n" \
"    local t, id = string.sub(e, 1, 1), string.sub(e, 3)\n" \
"    if t == 'r' then\n" \
"      local l = redis.call('HGET', K('room', id, 'links'), rid)\n" \
"      if l then local rec = cjson.decode(l)\n" \
"        f.grants[#f.grants + 1] = {via = 'room', by = rec.by, shared = rec.shared, member_in = inroster(id, mh)} end\n" \
"    else\n" \
"      local l = redis.call('HGET', K('proj', id, 'links'), rid)\n" \
"      if l then local rec = cjson.decode(l)\n" \
"        f.grants[#f.grants + 1] = {via = 'project', by = rec.by, shared = rec.shared,\n" \
"          member_in = redis.call('SISMEMBER', K('proj', id, 'members'), mh) == 1} end\n" \
"    end\n" \
"  end\n" \
"  return f\n" \
"end\n"

/* ARGV: rid, mh. */
#define LUA_FACTS LUA_LIB LUA_FACTS_FN \
"return cjson.encode(facts(ARGV[2], ARGV[3]))\n"

/* Everything admission and verification decide on, for one member. */
#define LUA_VIEW_FN \
"local function view(rh, mh, extra)\n" \
"  local h = redis.call('HMGET', K('room', rh), 'aver', 'seq')\n" \
"  if not h[1] then return {exists = false} end\n" \
"  local out = {exists = true, aver = tonumber(h[1]), seq = tonumber(h[2]), roster = roster(rh),\n" \
"               links = {}, sel = {}, scope = {}, res = {}}\n" \
"  local want = {}\n" \
"  local l = redis.call('HGETALL', K('room', rh, 'links'))\n" \
"  for i = 1, #l, 2 do local rec = cjson.decode(l[i + 1]); rec.rid = l[i]\n" \
"    out.links[#out.links + 1] = rec; want[l[i]] = true end\n" \
"  local s = redis.call('HGETALL', K('room', rh, 'sel'))\n" \
"  for i = 1, #s, 2 do out.sel[#out.sel + 1] = {rid = s[i], owner = s[i + 1]}; want[s[i]] = true end\n" \
"  for _, r in ipairs(redis.call('SMEMBERS', K('room', rh, 'scope', mh))) do\n" \
"    out.scope[#out.scope + 1] = r; want[r] = true end\n" \
"  for _, r in ipairs(cjson.decode(extra)) do want[r] = true end\n" \
"  for rid in pairs(want) do out.res[#out.res + 1] = facts(rid, mh) end\n" \
"  return out\n" \
"end\n"

/*
 * ARGV: rh, mh, extra rids (a JSON array).  One atomic read of everything
 * admission decides on.
 */
#define LUA_VIEW LUA_LIB LUA_FACTS_FN LUA_VIEW_FN \
"return cjson.encode(view(ARGV[2], ARGV[3], ARGV[4]))\n"

/*
 * ARGV: rh, mh, extra rids, sid.  What verification decides on: the view
 * and the stored snapshot, read atomically in one round trip (the stored
 * copy is returned as stored, never re-encoded, so it compares exactly).
 * Replies {view} when no such snapshot is stored.
 */
#define LUA_LIVE LUA_LIB LUA_FACTS_FN LUA_VIEW_FN \
"local v = cjson.encode(view(ARGV[2], ARGV[3], ARGV[4]))\n" \
"local s = redis.call('GET', K('snap', ARGV[5]))\n" \
"if not s then return {v} end\n" \
"return {v, s}\n"

/* ARGV: rh, aver, seq, sid, snapshot, ttl, mh, scope rids (JSON array). */
#define LUA_COMMIT LUA_LIB \
"local rh = ARGV[2]\n" \
"local h = redis.call('HMGET', K('room', rh), 'aver', 'seq')\n" \
"if h[1] ~= ARGV[3] or h[2] ~= ARGV[4] then return fail('conflict', 'the room changed during admission') end\n" \
"redis.call('HINCRBY', K('room', rh), 'seq', 1)\n" \
"redis.call('SET', K('snap', ARGV[5]), ARGV[6], 'EX', ARGV[7])\n" \
"for _, r in ipairs(cjson.decode(ARGV[9])) do redis.call('SADD', K('room', rh, 'scope', ARGV[8]), r) end\n" \
"return 1\n"

#endif
