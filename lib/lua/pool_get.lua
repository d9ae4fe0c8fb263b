local h = redis.call('HGETALL', W(ARGV[1]))
if #h == 0 then return fail('not_found', 'no such worker') end
local r = {}
for i = 1, #h, 2 do r[h[i]] = h[i + 1] end
r.owner = nil
r.epoch = redis.call('GET', P .. 'epoch') or ''
return cjson.encode(r)
