-- The place rule at link time (kz-project(8)): a file linked into a room
-- takes its path there, first come, first served.  It is checked against
-- the links any one projection can hold beside it: the room's shared
-- links and the linking member's own (another member's private link is
-- that member's alone, and its path is not told).  No path may equal, be
-- a directory of, or lie beneath one of theirs, and together with them the
-- file must stay within a projection's bounds, so no link can make the
-- room unadmittable for the others.  The reasons name the kind of clash,
-- never a path or an id (a refusal is logged).
--
-- The bounds, as the caller passes them from ARGV[i]: max files, max
-- bytes of one file, max total bytes.
local function bounds(i)
  return {files = tonumber(ARGV[i]), file = tonumber(ARGV[i + 1]), total = tonumber(ARGV[i + 2])}
end
local function beneath(a, b) return #a > #b and string.sub(a, 1, #b + 1) == b .. '/' end
-- Whether item rid, linked by mh, may sit at path with size in room rh:
-- nil when it may, else the refusal.  rid's own link is not counted, so a
-- new link or version of the same item takes its old place.
local function place(rh, rid, mh, path, size, bd)
  if size > bd.file then return fail('refused', 'the file is over the bound of one projected file') end
  local n, total = 1, size
  local l = redis.call('HGETALL', K('room', rh, 'links'))
  for i = 1, #l, 2 do
    local rec = cjson.decode(l[i + 1])
    if l[i] ~= rid and (rec.shared or rec.by == mh) then
      local h = redis.call('HMGET', K('res', l[i]), 'revoked', 'cur')
      local cur = tonumber(h[2] or '0') or 0
      if h[1] ~= '1' and cur > 0 then
        local v = redis.call('HMGET', K('res', l[i], 'v', cur), 'path', 'size')
        local q = v[1] or ''
        if q == path then return fail('refused', 'the room already has a file at this path (first linked, first placed)') end
        if beneath(path, q) then return fail('refused', 'this path lies beneath a file the room already has') end
        if beneath(q, path) then return fail('refused', 'the room already has files beneath this path') end
        n = n + 1
        total = total + (tonumber(v[2]) or 0)
      end
    end
  end
  if n > bd.files then return fail('refused', 'the room already holds as many files as one projection may') end
  if total > bd.total then return fail('refused', "the room's files would be over the total bytes of one projection") end
  return nil
end
