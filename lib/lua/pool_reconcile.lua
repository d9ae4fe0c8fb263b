local inv = {}
for _, id in ipairs(cjson.decode(ARGV[2])) do inv[id] = true end
local cgrace, rgrace = tonumber(ARGV[3]), tonumber(ARGV[4])
local t = now()
local seen, retire, delete, removed = {}, {}, {}, 0
local plan = {}
for _, st in ipairs(STATES) do
  for _, id in ipairs(redis.call('SMEMBERS', S(st))) do
    seen[id] = true
    local h = redis.call('HMGET', W(id), 'token', 'since')
    local age = t - tonumber(h[2] or '0')
    -- A worker the store holds is forgotten only once a delete confirms
    -- it absent, never on a list's word alone: a controller's list can
    -- lag or lie (after a restart kz-lease has no memory of what it
    -- listed), and a worker left running uncounted keeps its tenant's
    -- state.  Only an ambiguous create past its grace that the list does
    -- not name is taken as absent (kz-controller(7)).
    if st == 'retiring' or st == 'deleting' then
      plan[#plan + 1] = {id, st, 'delete'}
    elseif st == 'creating' then
      if ep_of(h[1]) ~= EP or age > cgrace then
        if inv[id] then plan[#plan + 1] = {id, st, 'deleting'}
        else plan[#plan + 1] = {id, st, 'forget'} end
      end
    elseif not inv[id] then
      plan[#plan + 1] = {id, st, 'deleting'}
    elseif ep_of(h[1]) ~= EP then
      plan[#plan + 1] = {id, st, 'retire'}
    elseif st == 'resetting' and age > rgrace then
      plan[#plan + 1] = {id, st, 'retire'}
    end
  end
end
local orphans = {}
for id, _ in pairs(inv) do
  if not seen[id] then orphans[#orphans + 1] = id end
end
for _, p in ipairs(plan) do
  local id, st, act = p[1], p[2], p[3]
  if act == 'forget' then
    forget(id, st)
    removed = removed + 1
  elseif act == 'delete' then
    delete[#delete + 1] = {worker = id,
      token = redis.call('HGET', W(id), 'token')}
  elseif act == 'deleting' then
    local tok = newtok(EP)
    if st == 'leased' then unlease(id) end
    move(id, st, 'deleting', t)
    redis.call('HSET', W(id), 'token', tok)
    delete[#delete + 1] = {worker = id, token = tok}
  else
    local tok = newtok(EP)
    if st == 'leased' then unlease(id) end
    move(id, st, 'retiring', t)
    redis.call('HSET', W(id), 'token', tok, 'why', 'reconcile')
    retire[#retire + 1] = {worker = id, token = tok}
  end
end
return done(opid, {retire = retire, delete = delete, orphans = orphans,
  removed = removed})
