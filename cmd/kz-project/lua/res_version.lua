-- ARGV: rid, mh, path, size, sha, ready, the three bounds.  Only the
-- owner writes.  A version is what every room the item is linked to
-- projects, so in each of them its path and size take their place by the
-- place rule (place_fn), as a new link would; one room that refuses
-- refuses the version.
local rid, mh = ARGV[2], ARGV[3]
local h = redis.call('HMGET', K('res', rid), 'owner', 'revoked')
if not h[1] then return fail('refused', 'unknown resource') end
if h[1] ~= mh then return fail('not_owner', 'only the owner may add a version') end
if h[2] == '1' then return fail('refused', 'resource revoked') end
for _, e in ipairs(redis.call('SMEMBERS', K('res', rid, 'in'))) do
  if string.sub(e, 1, 2) == 'r:' then
    local rh = string.sub(e, 3)
    local l = redis.call('HGET', K('room', rh, 'links'), rid)
    if l then
      local no = place(rh, rid, cjson.decode(l).by, ARGV[4], tonumber(ARGV[5]) or 0, bounds(8))
      if no then return fail('refused', 'in a room the file is linked to: ' .. cjson.decode(no).reason) end
    end
  end
end
local v = redis.call('HINCRBY', K('res', rid), 'cur', 1)
redis.call('HSET', K('res', rid, 'v', v), 'path', ARGV[4], 'size', ARGV[5], 'sha', ARGV[6], 'ready', ARGV[7])
return v
