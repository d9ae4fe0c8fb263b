-- Mutating scripts: answer a retried op id from its stored result, and
-- refuse to run on a store that has lost its epoch.
local opid = ARGV[1]
if opid ~= '' then
  local prev = redis.call('GET', P .. 'op:' .. opid)
  if prev then
    local r = cjson.decode(prev)
    r.replay = true
    return cjson.encode(r)
  end
end
local EP = redis.call('GET', P .. 'epoch')
if not EP then
  return fail('store_unavailable', 'store has no epoch (lost its data)')
end
