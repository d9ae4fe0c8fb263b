-- ARGV: rid, mh, kind[, conn, object].  A resource bound to a connection
-- names an existing platform-managed connection; nothing else binds it.
local rid, mh, kind, conn, obj = ARGV[2], ARGV[3], ARGV[4], ARGV[5] or '', ARGV[6] or ''
if not ismember(mh) then return fail('refused', 'unknown member') end
if exists(K('res', rid)) then return fail('refused', 'resource exists') end
if conn ~= '' and not exists(K('conn', conn)) then return fail('refused', 'unknown connection') end
redis.call('HSET', K('res', rid), 'owner', mh, 'kind', kind, 'cur', 0, 'revoked', 0)
if conn ~= '' then redis.call('HSET', K('res', rid), 'conn', conn, 'obj', obj) end
return 1
