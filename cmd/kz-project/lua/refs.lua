-- ARGV: prefix, cursor.  One page of the deployment's versions (SCAN,
-- COUNT 1000) and the blob each names: {next cursor, sha, ...}; a
-- pending version names none.  Read-only.  blob-collect (collect.c) pages
-- through it on one server: SCAN lists that server's keys, and a cluster
-- store is refused before.  A key of another shape is not a version.
local r = redis.call('SCAN', ARGV[2], 'MATCH', P .. 'res:*:v:*', 'COUNT', 1000)
local out = {r[1]}
for _, k in ipairs(r[2]) do
  if string.sub(k, #P + 1):match('^res:[%w_%-]+:v:%d+$') then
    local sha = redis.call('HGET', k, 'sha')
    if sha and #sha == 64 then out[#out + 1] = sha end
  end
end
return out
