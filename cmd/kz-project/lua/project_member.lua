-- ARGV: pid, mh, on.  Every chat linked to the project changes audience.
local pid = ARGV[2]
local ch, no = enrol('proj', pid, ARGV[3], ARGV[4], 'unknown project')
if no then return no end
if ch == 1 then
  for _, rh in ipairs(redis.call('SMEMBERS', K('proj', pid, 'rooms'))) do bump(rh) end
end
return ch
