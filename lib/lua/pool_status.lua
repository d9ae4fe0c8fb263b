local res = {capacity = tonumber(ARGV[1]), epoch =
  redis.call('GET', P .. 'epoch') or '', total = 0}
for _, st in ipairs(STATES) do
  res[st] = redis.call('SCARD', S(st))
  res.total = res.total + res[st]
end
res.members = redis.call('HLEN', P .. 'members')
return cjson.encode(res)
