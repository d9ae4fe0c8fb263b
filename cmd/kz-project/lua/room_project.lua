-- ARGV: rh, pid, mh, on.  Linking a chat to a project widens its audience.
local rh, pid, mh, on = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
if not exists(K('room', rh)) then return fail('refused', 'unknown room') end
if not exists(K('proj', pid)) then return fail('refused', 'unknown project') end
if redis.call('SISMEMBER', K('room', rh, 'members'), mh) == 0 or
   redis.call('SISMEMBER', K('proj', pid, 'members'), mh) == 0 then
  return fail('refused', 'the member must belong to the chat and the project') end
local ch
if on == '1' then
  ch = redis.call('SADD', K('room', rh, 'projects'), pid)
  redis.call('SADD', K('proj', pid, 'rooms'), rh)
else
  ch = redis.call('SREM', K('room', rh, 'projects'), pid)
  redis.call('SREM', K('proj', pid, 'rooms'), rh)
end
if ch == 1 then return bump(rh) end
return aver(rh)
