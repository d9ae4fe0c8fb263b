-- Everything admission and verification decide on, for one member.
local function view(rh, mh, extra)
  local h = redis.call('HMGET', K('room', rh), 'aver', 'seq')
  if not h[1] then return {exists = false} end
  local out = {exists = true, aver = tonumber(h[1]), seq = tonumber(h[2]), roster = roster(rh),
               links = {}, sel = {}, scope = {}, res = {}}
  local want = {}
  local l = redis.call('HGETALL', K('room', rh, 'links'))
  for i = 1, #l, 2 do local rec = cjson.decode(l[i + 1]); rec.rid = l[i]
    out.links[#out.links + 1] = rec; want[l[i]] = true end
  local s = redis.call('HGETALL', K('room', rh, 'sel'))
  for i = 1, #s, 2 do out.sel[#out.sel + 1] = {rid = s[i], owner = s[i + 1]}; want[s[i]] = true end
  for _, r in ipairs(redis.call('SMEMBERS', K('room', rh, 'scope', mh))) do
    out.scope[#out.scope + 1] = r; want[r] = true end
  for _, r in ipairs(cjson.decode(extra)) do want[r] = true end
  for rid in pairs(want) do out.res[#out.res + 1] = facts(rid, mh) end
  return out
end
