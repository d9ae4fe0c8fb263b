-- ARGV: rid, mh, "room"|"project", target.
local rid, mh, tk, tg = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local lk = tk == 'room' and K('room', tg, 'links') or K('proj', tg, 'links')
local l = redis.call('HGET', lk, rid)
if not l then return fail('refused', 'no such link') end
local rec = cjson.decode(l)
if rec.by ~= mh and redis.call('HGET', K('res', rid), 'owner') ~= mh then
  return fail('not_owner', 'only the linking member or the owner may withdraw') end
redis.call('HDEL', lk, rid)
redis.call('SREM', K('res', rid, 'in'), (tk == 'room' and 'r:' or 'p:') .. tg)
return 1
