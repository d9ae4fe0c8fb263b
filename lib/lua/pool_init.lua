local ep = redis.call('GET', P .. 'epoch')
local rid = redis.call('GET', P .. 'runid')
if ep and rid == ARGV[1] then
  return cjson.encode({epoch = ep, changed = false})
end
redis.call('SET', P .. 'epoch', ARGV[2])
redis.call('SET', P .. 'runid', ARGV[1])
return cjson.encode({epoch = ARGV[2], changed = true})
