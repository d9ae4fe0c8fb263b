-- Whether connection c serves member mh now (directly or by project).
local function serves(c, mh)
  if not exists(K('conn', c)) then return false end
  if redis.call('SISMEMBER', K('conn', c, 'members'), mh) == 1 then return true end
  for _, p in ipairs(redis.call('SMEMBERS', K('conn', c, 'projects'))) do
    if redis.call('SISMEMBER', K('proj', p, 'members'), mh) == 1 then return true end
  end
  return false
end
local function facts(rid, mh)
  local h = redis.call('HMGET', K('res', rid), 'owner', 'kind', 'revoked', 'cur', 'conn')
  if not h[1] then return {id = rid, exists = false} end
  local f = {id = rid, exists = true, owner = h[1], kind = h[2], revoked = (h[3] == '1'),
             cur = tonumber(h[4] or '0'), grants = {}}
  if h[5] and h[5] ~= '' then f.conn = h[5]; f.conn_ok = serves(h[5], mh) end
  if f.cur > 0 then
    local v = redis.call('HMGET', K('res', rid, 'v', f.cur), 'path', 'size', 'sha', 'ready')
    f.path = v[1]; f.size = tonumber(v[2]); f.sha = v[3]; f.ready = (v[4] == '1')
  end
  for _, e in ipairs(redis.call('SMEMBERS', K('res', rid, 'in'))) do
    local t, id = string.sub(e, 1, 1), string.sub(e, 3)
    if t == 'r' then
      local l = redis.call('HGET', K('room', id, 'links'), rid)
      if l then local rec = cjson.decode(l)
        f.grants[#f.grants + 1] = {via = 'room', by = rec.by, shared = rec.shared, member_in = inroster(id, mh)} end
    else
      local l = redis.call('HGET', K('proj', id, 'links'), rid)
      if l then local rec = cjson.decode(l)
        f.grants[#f.grants + 1] = {via = 'project', by = rec.by, shared = rec.shared,
          member_in = redis.call('SISMEMBER', K('proj', id, 'members'), mh) == 1} end
    end
  end
  return f
end
