-- ARGV: rid, mh, "room"|"project", target, turn, shared, the three
-- bounds.  Only the owner links (a project grant is no re-share
-- authority).  A room link takes its place by the place rule (place_fn)
-- and the next value of the room's sequence, so verify can tell a link the
-- running turn made after its admission point from every other change.  A
-- project is never projected as a whole: its links take no place.
local rid, mh, tk, tg, turn, sh = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7] == '1'
local h = redis.call('HMGET', K('res', rid), 'owner', 'kind', 'revoked', 'cur')
if not h[1] then return fail('refused', 'unknown resource') end
if h[3] == '1' then return fail('refused', 'resource revoked') end
if h[1] ~= mh then return fail('not_owner', 'only the owner may link or re-share an item') end
if h[2] == 'library' then return fail('refused', 'a private-library file binds to a chat as a selection, never as a link') end
if tk == 'room' then
  if not exists(K('room', tg)) then return fail('refused', 'unknown room') end
  if not inroster(tg, mh) then return fail('refused', 'the member cannot see the room') end
  local cur = tonumber(h[4] or '0') or 0
  if cur > 0 then
    local v = redis.call('HMGET', K('res', rid, 'v', cur), 'path', 'size')
    local no = place(tg, rid, mh, v[1] or '', tonumber(v[2]) or 0, bounds(8))
    if no then return no end
  end
  local seq = redis.call('HINCRBY', K('room', tg), 'seq', 1)
  redis.call('HSET', K('room', tg, 'links'), rid, cjson.encode({by = mh, turn = turn, seq = seq, shared = sh}))
  redis.call('SADD', K('res', rid, 'in'), 'r:' .. tg)
  return seq
end
if redis.call('SISMEMBER', K('proj', tg, 'members'), mh) == 0 then return fail('refused', 'the member is not in the project') end
redis.call('HSET', K('proj', tg, 'links'), rid, cjson.encode({by = mh, turn = turn, seq = 0, shared = sh}))
redis.call('SADD', K('res', rid, 'in'), 'p:' .. tg)
return 0
