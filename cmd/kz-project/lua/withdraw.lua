-- ARGV: rid, mh, "room"|"project", target.  The linking member or the
-- item's owner withdraws a link; a room's owner, while in the room,
-- withdraws any link of that room (the room's content is the owner's to
-- keep in order; the item itself stays its owner's).
local rid, mh, tk, tg = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local lk = tk == 'room' and K('room', tg, 'links') or K('proj', tg, 'links')
local l = redis.call('HGET', lk, rid)
if not l then return fail('refused', 'no such link') end
local rec = cjson.decode(l)
local host = tk == 'room' and redis.call('HGET', K('room', tg), 'owner') == mh and inroster(tg, mh)
if rec.by ~= mh and redis.call('HGET', K('res', rid), 'owner') ~= mh and not host then
  return fail('not_owner', "only the linking member, the owner or the room's owner may withdraw") end
redis.call('HDEL', lk, rid)
redis.call('SREM', K('res', rid, 'in'), (tk == 'room' and 'r:' or 'p:') .. tg)
return 1
