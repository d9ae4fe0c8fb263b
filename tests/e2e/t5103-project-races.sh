#!/bin/bash
# kz-project races between admission and the bytes loading: a member joins
# between admit and verify, a new version lands between admit and
# materialize, a blob's bytes change on disk after admission.  Each must
# refuse before any byte is delivered; the same steps without the race go.
. "$(dirname "$0")/lib.sh"
plan 12
. "$(dirname "$0")/project-lib.sh"

for m in alice bob; do q member-create --member $m; done
q room-create --room r --member alice
doc alice d1 a.txt "alpha bytes"
doc alice d2 b/b.txt "beta bytes"
for d in d1 d2; do q link --resource $d --member alice --room r --turn t0 --shared; done

# A member joins between admit and verify.
kz-project admit --room r --member alice --turn t1 >"$T/s1.json"
t "race: verify goes when nobody joined" kz-project verify --snapshot "$T/s1.json"
q room-join --room r --member bob
is "$(code verify --snapshot "$T/s1.json")" resource_audience_changed \
	"race: refused: a member joined between admit and verify"
is "$(code materialize --snapshot "$T/s1.json" --dest "$T/p1")" resource_audience_changed \
	"race: refused: ...and materialize delivers nothing"
t "race: no projection exists" test ! -e "$T/p1"

# A new version lands between admit (and verify) and materialize.
kz-project admit --room r --member alice --turn t2 >"$T/s2.json"
t "race: verify goes before the new version" kz-project verify --snapshot "$T/s2.json"
q version-new --resource d2 --member alice --path b/b.txt --blob "$(blob "beta v2")"
is "$(code materialize --snapshot "$T/s2.json" --dest "$T/p2")" manifest_changed \
	"race: refused: a new version landed between admit and materialize"
t "race: no projection exists" test ! -e "$T/p2"

# A blob's bytes are altered on disk after admission.
kz-project admit --room r --member alice --turn t3 >"$T/s3.json"
t "race: materialize goes on intact blobs" \
	kz-project materialize --snapshot "$T/s3.json" --dest "$T/p3ok"
kz-project admit --room r --member alice --turn t4 >"$T/s4.json"
SHA=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["items"][0]["sha256"])' "$T/s4.json")
chmod 0644 "$T/blobs/$SHA"; printf 'ALPHA BYTES' >"$T/blobs/$SHA"
t "race: verify checks metadata only and still goes" kz-project verify --snapshot "$T/s4.json"
is "$(code materialize --snapshot "$T/s4.json" --dest "$T/p4")" refused \
	"race: refused: a blob whose bytes no longer match the admitted digest"
t "race: no projection and no temporary tree is left" \
	sh -c "! ls -A '$T' | grep -Eq '^(p4|\\.kzp-)'"
printf 'short' >"$T/blobs/$SHA"
is "$(code materialize --snapshot "$T/s4.json" --dest "$T/p5")" refused \
	"race: refused: a blob whose size changed"
done_testing
