-- ARGV: rh, mh, extra rids (a JSON array).  One atomic read of everything
-- admission decides on.
return cjson.encode(view(ARGV[2], ARGV[3], ARGV[4]))
