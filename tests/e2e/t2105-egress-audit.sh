#!/usr/bin/env bash
# kz-egress under kz-supervise with the real kz-audit: a refusal lands in
# the audit log as an egress_refusal event with host, port, reason, run hash
# and request id, and nothing from the URL's path or query or the grant.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/egress/lib.sh"
if [ ! -x "$BIN/kz-audit" ] || [ ! -x "$BIN/kz-supervise" ]; then
	echo "1..0 # SKIP kz-audit or kz-supervise missing"; exit 0
fi
plan 6
R=$T/run
on_exit "kz-supervise stop --run-dir $R >/dev/null 2>&1"
t "kz-supervise starts the deployment" kz-supervise start --run-dir "$R"
G=$(kz-egress grant --field-key "$R/field.key" --run audit-run)
O=$(printf 'GET http://127.1:80/secret/path?tok=q1 HTTP/1.1\r\nHost: a\r\nProxy-Authorization: Bearer %s\r\n\r\n' "$G" |
	"$EG_PY" "$TOP/tests/egress/raw.py" "unix:$R/kz-egress.sock" 3)
like "$O" '^HTTP/1.1 403 Forbidden' "the spelled-out loopback address is refused"
i=0; Q=
while [ $i -lt 50 ]; do
	Q=$(kz-audit query --kind egress_refusal --dir "$R/audit" 2>/dev/null)
	[ -n "$Q" ] && break
	i=$((i + 1)); sleep 0.1
done
like "$Q" '"kind":"egress_refusal","event":\{"host":"127.0.0.1","port":80,"reason":"loopback","run_hash":"[0-9a-f]{32}","rid":"[0-9a-f]{16}"\}' \
	"the audit log holds the refusal with host, port, reason, run hash and rid"
unlike "$Q" 'secret|tok|q1|Bearer' "no path, query or grant in the audit log"
unlike "$(cat "$R/log/kz-egress.log")" "secret|tok=|${G:10:30}" "nor in the proxy's log"
t "the audit chain verifies" kz-audit verify --field-key "$R/field.key" --dir "$R/audit"
done_testing
