-- ARGV: pid, mh, on.  Every chat linked to the project changes audience.
local pid, mh, on = ARGV[2], ARGV[3], ARGV[4]
if not ismember(mh) then return fail('refused', 'unknown member') end
if not exists(K('proj', pid)) then return fail('refused', 'unknown project') end
local ch
if on == '1' then ch = redis.call('SADD', K('proj', pid, 'members'), mh)
else ch = redis.call('SREM', K('proj', pid, 'members'), mh) end
if ch == 1 then
  for _, rh in ipairs(redis.call('SMEMBERS', K('proj', pid, 'rooms'))) do bump(rh) end
end
return ch
