#!/usr/bin/env bash
# kz-egress one-shot subcommands: version and help, the scope in force
# (`status`, text and JSON) and how unusable settings resolve to isolated,
# grant keys, TURN credentials, and a daemon started on an unreadable config
# that refuses everything.  Under the address families its systemd unit
# allows (RestrictAddressFamilies=, emulated with a seccomp filter), the
# proxy can still read its host's addresses (netlink) and is not isolated.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/egress/lib.sh"
plan 43
for k in $(env | grep -o '^SANDBOX_EGRESS_[A-Z_]*'); do unset "$k"; done
unset KZ_CONFIG KZ_SOCKET

is "$(kz-egress --version)" "kz-egress 0.1.0" "--version"
t "--help exits 0" kz-egress --help
like "$(kz-egress --help)" 'turn-credential' "--help lists every subcommand"
rc_is 2 "an unknown subcommand is a usage error" kz-egress frobnicate
rc_is 2 "check without a port is a usage error" kz-egress check example.com

eg_keys
DNS=127.0.0.1:53
good() {
	cat <<EOF
SANDBOX_EGRESS_PUBLIC_KEY_FILE = $EG_PK
SANDBOX_EGRESS_RESOLVER = $DNS
SANDBOX_EGRESS_LISTEN = 127.0.0.1:3128
EOF
}
good >"$T/good.conf"
S=$(kz-egress status --config "$T/good.conf")
like "$S" '^mode in force: public_internet' "defaults: public_internet in force"
UNIT=$TOP/etc/systemd/kz-egress.service
AF=$(sed -n 's/^RestrictAddressFamilies=//p' "$UNIT" | tr ' ' ',')
cc -o "$T/restrict_af" "$TOP/tests/egress/restrict_af.c" -lseccomp
like "$("$T/restrict_af" AF_UNIX,AF_INET,AF_INET6 kz-egress status --config "$T/good.conf")" \
	'isolated because: the host.s own addresses cannot be read' \
	"without netlink the host's addresses cannot be read: isolated (the filter bites)"
like "$("$T/restrict_af" "$AF" kz-egress status --config "$T/good.conf")" \
	'^mode in force: public_internet' "under the unit's address families ($AF): not isolated"
like "$S" 'ports: 80 443' "defaults: ports 80 and 443"
like "$S" 'denied in every mode:.*loopback.*link_local.*metadata.*multicast.*broadcast.*reserved.*control_plane.*own_address' \
	"status names the classes denied in every mode"
like "$S" 'token ttl: 600s' "default grant lifetime 600 s"
J=$(kz-egress status --json --config "$T/good.conf")
t "status --json is JSON" "$EG_PY" -c 'import json,sys; json.loads(sys.argv[1])' "$J"
like "$J" '"mode":"public_internet".*"ports":\[80,443\]' "JSON: mode and ports"
like "$J" '"denied_in_every_mode":\[[^]]*"metadata"' "JSON: denied classes"
unlike "$J" 'isolated_because' "JSON: no isolation reason when the scope holds"

S=$(kz-egress status --json)
like "$S" '"mode":"isolated".*"isolated_because":"no public key' \
	"nothing configured: isolated, naming the missing public key"
S=$(kz-egress status --json --config "$T/nonexistent.conf" 2>/dev/null)
like "$S" '"mode":"isolated","configured_mode":"public_internet","isolated_because":"config cannot be used' \
	"an unreadable config resolves to isolated, never the open default"
{ good; echo "SANDBOX_EGRESS_MOOD = open"; } >"$T/unknown.conf"
like "$(kz-egress status --config "$T/unknown.conf" 2>/dev/null | tr '\n' ' ')" \
	'^scope from the configuration .*mode in force: isolated.*isolated because: config cannot be used: line 4: unknown key' \
	"an unparseable config resolves to isolated and says why"
{ good; echo "SANDBOX_EGRESS_ALLOWED_PORTS = 80,https"; } >"$T/ports.conf"
like "$(kz-egress status --config "$T/ports.conf" | tr '\n' ' ')" \
	'mode in force: isolated isolated because: unusable port list' \
	"an unusable port list: isolated, prerequisite named"
{ good; echo "SANDBOX_EGRESS_MODE = public-internet"; } >"$T/mode.conf"
like "$(kz-egress status --config "$T/mode.conf" | tr '\n' ' ')" \
	'isolated because: SANDBOX_EGRESS_MODE is not a known mode' \
	"a misspelt mode is isolated, not the default"
{ good; echo "SANDBOX_EGRESS_ENABLED = off"; } >"$T/off.conf"
like "$(kz-egress status --config "$T/off.conf" | tr '\n' ' ')" \
	'mode in force: isolated isolated because: egress disabled' "ENABLED=off is isolated"
grep -v LISTEN "$T/good.conf" >"$T/nolisten.conf"
like "$(kz-egress status --config "$T/nolisten.conf" | tr '\n' ' ')" \
	'isolated because: no listen address' "no listen address: isolated, prerequisite named"
like "$(SANDBOX_EGRESS_MODE=private_networks kz-egress status --config "$T/good.conf")" \
	'^mode in force: private_networks' "the environment overrides the file"
{ good; echo "SANDBOX_EGRESS_TOKEN_TTL_SECONDS = 86400"; } >"$T/ttl.conf"
like "$(kz-egress status --json --config "$T/ttl.conf")" \
	'"token_ttl_seconds":14400,"token_ttl_clamped":true' "a TTL over 4 h is clamped and reported"
{ good; echo "SANDBOX_EGRESS_TOKEN_TTL_SECONDS = 14400"; } >"$T/ttl4.conf"
like "$(kz-egress status --json --config "$T/ttl4.conf")" \
	'"token_ttl_seconds":14400,"token_ttl_clamped":false' "a 4 h TTL stays valid"

# Keys: the daemon needs only the public half.
P1=$(kz-egress pubkey --field-key "$EG_KEY")
is "$P1" "$(cat "$EG_PK")" "pubkey is deterministic for a field key"
head -c 32 /dev/urandom >"$T/other.key"; chmod 600 "$T/other.key"
t "another field key, another public key" test "$P1" != "$(kz-egress pubkey --field-key "$T/other.key")"
chmod 644 "$T/other.key"
rc_is 2 "a field key readable by others is refused" kz-egress pubkey --field-key "$T/other.key"
rc_is 2 "grant without --run is a usage error" kz-egress grant --field-key "$EG_KEY"
G=$(kz-egress grant --field-key "$EG_KEY" --run run-1 --cap turn)
like "$G" '^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$' "a grant is base64url(claims).base64url(signature)"
like "$(printf '%s' "${G%%.*}" | tr '_-' '/+' | base64 -d 2>/dev/null)" \
	'^\{"v":1,"run":"[0-9a-f]{32}","iat":[0-9]+,"nbf":[0-9]+,"exp":[0-9]+,"caps":\["turn"\]\}$' \
	"claims: hashed run id, times and capabilities; never the raw run id"

# TURN REST credentials, checked against an independent HMAC-SHA1.
printf 'sharedsecret\n' >"$T/turn.secret"
C=$(kz-egress turn-credential --secret-file "$T/turn.secret" --user alice --ttl 600)
U=$(printf '%s' "$C" | sed 's/.*"username":"\([^"]*\)".*/\1/')
W=$(printf '%s' "$C" | sed 's/.*"password":"\([^"]*\)".*/\1/')
like "$U" '^[0-9]+:alice$' "TURN username is expiry:user"
is "$W" "$("$EG_PY" -c 'import base64,hashlib,hmac,sys; print(base64.b64encode(hmac.new(b"sharedsecret", sys.argv[1].encode(), hashlib.sha1).digest()).decode())' "$U")" \
	"TURN password is base64 HMAC-SHA1 of the username"
rc_is 2 "TURN credentials live at most an hour" kz-egress turn-credential \
	--secret-file "$T/turn.secret" --user alice --ttl 7200
# Hostile user names: the output is one JSON object whose username is
# exactly expiry:NAME, whatever the name holds.
for u in 'a"b' 'a\b' 'a\"},{"x"' "o'brien" '</script>' 'é☃'; do
	C=$(kz-egress turn-credential --secret-file "$T/turn.secret" --user "$u")
	is "$(printf '%s' "$C" | "$EG_PY" -c 'import json,sys
o = json.load(sys.stdin)
u = o["username"].split(":", 1)
print("ok" if sorted(o) == ["password", "ttl", "username"] and
      u[0].isdigit() and u[1] == sys.argv[1] else "bad: %r" % o)' "$u" 2>&1)" ok \
		"turn-credential --user $u prints valid JSON with that name"
done
rc_is 2 "a user name with a control character is a usage error" \
	kz-egress turn-credential --secret-file "$T/turn.secret" --user "$(printf 'a\033b')"
rc_is 2 "a user name that is not UTF-8 is a usage error" \
	kz-egress turn-credential --secret-file "$T/turn.secret" --user "$(printf 'a\377b')"

# A daemon whose config cannot be read runs isolated and refuses.
bg kz-egress serve --config "$T/nonexistent.conf" --socket "$T/eg.sock" 2>"$T/iso.log"
wait_sock "$T/eg.sock" 10
R=$(printf 'GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nProxy-Authorization: Bearer %s\r\n\r\n' "$G" |
	"$EG_PY" "$TOP/tests/egress/raw.py" "unix:$T/eg.sock" 3)
like "$R" '^HTTP/1.1 403 Forbidden' "served on an unreadable config: everything refused"
done_testing
