-- ARGV: cid, bucket, served member hashes (JSON array), pid or "".  A
-- platform-managed connection: created by the operator, never from a
-- declared source.
local cid, bucket, ms, pid = ARGV[2], ARGV[3], cjson.decode(ARGV[4]), ARGV[5]
if exists(K('conn', cid)) then return fail('refused', 'connection exists') end
for _, m in ipairs(ms) do if not ismember(m) then return fail('refused', 'unknown member') end end
if pid ~= '' and not exists(K('proj', pid)) then return fail('refused', 'unknown project') end
redis.call('HSET', K('conn', cid), 'bucket', bucket)
for _, m in ipairs(ms) do redis.call('SADD', K('conn', cid, 'members'), m) end
if pid ~= '' then redis.call('SADD', K('conn', cid, 'projects'), pid) end
return 1
