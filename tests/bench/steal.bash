# Sourced by the benchmarks.  The host's steal time (the 8th value of
# /proc/stat's cpu line): on a shared machine it says how much of a run's
# CPU went elsewhere.  ST0=$(steal) ... steal_since "$ST0" prints the
# share stolen since, e.g. 3.8%.
steal() { awk '/^cpu / { print $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat; }
steal_since() { # steal_since "STEAL TOTAL"
	echo "$1 $(steal)" | awk '{ if ($4 > $2) printf "%.1f%%", ($3 - $1) * 100 / ($4 - $2); else print "n/a" }'
}
