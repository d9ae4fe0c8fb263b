if redis.call('SETNX', K('member', ARGV[2]), '1') == 0 then return fail('refused', 'member exists') end
return 1
