-- ARGV: rid, mh.
return cjson.encode(facts(ARGV[2], ARGV[3]))
