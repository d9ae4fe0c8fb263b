-- ARGV: rh, mh, "1" join / "0" leave.
local rh = ARGV[2]
local ch, no = enrol('room', rh, ARGV[3], ARGV[4], 'unknown room')
if no then return no end
if ch == 1 then return bump(rh) end
return aver(rh)
