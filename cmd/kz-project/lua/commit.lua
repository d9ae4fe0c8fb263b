-- ARGV: rh, aver, seq, sid, snapshot, ttl, mh, scope rids (JSON array).
local rh = ARGV[2]
local h = redis.call('HMGET', K('room', rh), 'aver', 'seq')
if h[1] ~= ARGV[3] or h[2] ~= ARGV[4] then return fail('conflict', 'the room changed during admission') end
redis.call('HINCRBY', K('room', rh), 'seq', 1)
redis.call('SET', K('snap', ARGV[5]), ARGV[6], 'EX', ARGV[7])
for _, r in ipairs(cjson.decode(ARGV[9])) do redis.call('SADD', K('room', rh, 'scope', ARGV[8]), r) end
return 1
