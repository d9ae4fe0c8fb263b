#!/bin/bash
# kz-project's declared-source rule (declared object-store sources grant
# nothing; reading goes through a platform-managed connection under the
# current member) and the shared-output rule's placeholder (a run-bound
# room reference, no resource identity, no URL, never the provider's call
# id), against a real redis-server.
. "$(dirname "$0")/lib.sh"
plan 29
. "$(dirname "$0")/project-lib.sh"

for m in alice bob carol dave erin; do q member-create --member $m; done
q room-create --room r12 --member alice
for m in bob carol erin; do q room-join --room r12 --member $m; done
q project-create --project pP --member alice; q project-join --project pP --member erin

# --- the declared-source rule: resolution through a platform-managed connection ---
t "declared-source rule: the operator creates a connection serving named members" \
	kz-project connection-create --connection c1 --bucket bkt --serves alice --serves bob --serves dave
t "declared-source rule: a resource is bound to the connection with an object key" \
	kz-project resource-create --resource o1 --member alice --connection c1 --object data/plan.csv
SHA=$(blob "plan bytes")
q version-new --resource o1 --member alice --path plan.csv --blob "$SHA"
q link --resource o1 --member alice --room r12 --shared
kz-project resolve --member bob --resource o1 >"$T/res.json"
is "$?" 0 "declared-source rule: a served member who can read the item resolves it through the connection"
is "$(js "$T/res.json" 'd["connection"] + " " + d["sha256"]')" "c1 $SHA" \
	"declared-source rule: resolution names the connection and the content digest in the blob store"
unlike "$(cat "$T/res.json")" 'bkt|data/plan|plan bytes' \
	"declared-source rule: the reply carries no bucket, object key or bytes"
t "declared-source rule: can-read agrees for a served reader" kz-project can-read --member bob --resource o1
is "$(code resolve --member carol --resource o1)" refused \
	"declared-source rule: refused: a reader the connection does not serve"
is "$(code can-read --member carol --resource o1)" refused \
	"declared-source rule: refused: can-read goes through the connection too"
kz-project admit --room r12 --member bob --turn t1 --select o1 >"$T/a.json"
like "$(js "$T/a.json" '",".join(i["id"] for i in d["items"])')" 'o1' \
	"declared-source rule: admission projects a connection-bound item for a served member"
is "$(code admit --room r12 --member carol --turn t1 --select o1)" refused \
	"declared-source rule: refused: admission of a connection-bound item for an unserved member"
is "$(code resolve --member dave --resource o1)" refused \
	"declared-source rule: refused: a served member who cannot otherwise read the item"
t "declared-source rule: a connection may serve a project's members" \
	kz-project connection-create --connection c2 --project pP
q resource-create --resource o2 --member alice --connection c2 --object data/o2.csv
q version-new --resource o2 --member alice --path o2.csv --blob "$(blob "o2 bytes")"
q link --resource o2 --member alice --room r12 --shared
t "declared-source rule: a project member who can read the item resolves it" \
	kz-project resolve --member erin --resource o2
q project-leave --project pP --member erin
is "$(code resolve --member erin --resource o2)" refused \
	"declared-source rule: refused: the connection no longer serves a member who left the project"
doc_plain() { q resource-create --resource d1 --member alice &&
	q version-new --resource d1 --member alice --path d.txt --blob "$(blob "d")" &&
	q link --resource d1 --member alice --room r12 --shared; }
doc_plain
is "$(code resolve --member bob --resource d1)" refused \
	"declared-source rule: refused: an item not bound to a connection resolves through none"

# Declared sources: inert, even naming the same bucket and object key.
t "declared-source rule: a declared source naming the same bucket and key is recorded" \
	kz-project declare-source --project pP --member alice --name src1 --kind s3 \
	--bucket bkt --key data/plan.csv --url "https://example.invalid/o?sig=x"
is "$(code resolve --member carol --resource src1)" refused \
	"declared-source rule: refused: a declared source resolves nothing"
rc_is 2 "declared-source rule: refused: resolution takes no bucket or key from the request" \
	kz-project resolve --member carol --bucket bkt --key data/plan.csv
rc_is 2 "declared-source rule: refused: a connection is not made from a declared source's URL" \
	kz-project connection-create --connection c3 --serves carol --url "https://example.invalid/o?sig=x"
is "$(code connection-create --connection c4 --bucket bkt)" bad_request \
	"declared-source rule: refused: a connection must name whom it serves"
is "$(code resource-create --resource o3 --member carol --connection nosuch --object k)" refused \
	"declared-source rule: refused: binding to a connection the platform did not create"
is "$(code resource-create --resource o4 --member carol --object data/plan.csv)" bad_request \
	"declared-source rule: refused: an object key without a connection"

# --- the shared-output rule: placeholders for outputs in progress ---------
kz-project placeholder --room r12 --run run7 --call call_provider_XYZ --name deck.pptx >"$T/ph.json"
is "$(js "$T/ph.json" '",".join(sorted(d))')" "name,ref,state" \
	"shared-output rule: a placeholder in a shared room carries only its name, reference and state"
like "$(js "$T/ph.json" 'd["ref"]')" '^[0-9a-f]{32}$' \
	"shared-output rule: the call is named by a run-bound room reference"
unlike "$(cat "$T/ph.json")" 'call_provider_XYZ|o1|http' \
	"shared-output rule: no provider call id, resource id or URL in the placeholder"
rc_is 2 "shared-output rule: refused: a placeholder that names a resource" \
	kz-project placeholder --room r12 --run run7 --call c --name deck.pptx --resource o1
rc_is 2 "shared-output rule: refused: a placeholder name that is a URL" \
	kz-project placeholder --room r12 --run run7 --call c --name "https://example.invalid/deck.pptx"
rc_is 2 "shared-output rule: refused: a placeholder that carries a URL field" \
	kz-project placeholder --room r12 --run run7 --call c --name deck.pptx --url https://example.invalid/x
rc_is 2 "shared-output rule: refused: a request that sets the reference to the provider's call id" \
	kz-project placeholder --room r12 --run run7 --call c --name deck.pptx --ref call_provider_XYZ
done_testing
