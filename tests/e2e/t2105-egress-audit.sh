#!/usr/bin/env bash
# kz-egress under kz-supervise with the real kz-audit: a refusal lands in
# the audit log as an egress_refusal event with host, port, reason, run hash
# and request id, and nothing from the URL's path or query or the grant.
# One run that floods the proxy with refused requests while the sink is
# slow cannot crowd another run's refusal out of the audit trail.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/egress/lib.sh"
if [ ! -x "$BIN/kz-audit" ] || [ ! -x "$BIN/kz-supervise" ]; then
	echo "1..0 # SKIP kz-audit or kz-supervise missing"; exit 0
fi
plan 9
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

# The sink stopped (as a slow disk would hold it): run "flood" sends 1200
# refused requests, more than the proxy's queue of 1024 events, then run
# "victim" one; the victim's refusal still reaches the log.
AP=$(cat "$R/kz-audit.pid")
FG=$(kz-egress grant --field-key "$R/field.key" --run flood-run)
VG=$(kz-egress grant --field-key "$R/field.key" --run victim-run)
kill -STOP "$AP"
"$EG_PY" - "$R/kz-egress.sock" "$FG" 1200 <<'PY'
import socket, sys
path, grant, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
req = ("GET http://127.0.0.3:80/ HTTP/1.1\r\nHost: a\r\n"
       "Proxy-Authorization: Bearer %s\r\n\r\n" % grant).encode()
for _ in range(n):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(3)
    s.connect(path)
    s.sendall(req)
    try:
        s.recv(4096)
    except OSError:
        pass
    s.close()
PY
printf 'GET http://169.254.169.254:80/ HTTP/1.1\r\nHost: a\r\nProxy-Authorization: Bearer %s\r\n\r\n' "$VG" |
	"$EG_PY" "$TOP/tests/egress/raw.py" "unix:$R/kz-egress.sock" 3 >"$T/victim"
kill -CONT "$AP"
like "$(head -1 "$T/victim")" '^HTTP/1.1 403' "the victim run's request is refused"
VH=$(grep -o '"run_hash":"[0-9a-f]*"' "$R/log/kz-egress.log" | tail -1)
i=0; Q=
while [ $i -lt 300 ]; do
	Q=$(kz-audit query --kind egress_refusal --dir "$R/audit" 2>/dev/null | grep -F "$VH" | grep -c metadata)
	[ "${Q:-0}" -ge 1 ] && break
	i=$((i + 1)); sleep 0.1
done
is "${Q:-0}" 1 "its refusal reaches the audit log past the flooding run's"
like "$(cat "$R/log/kz-egress.log")" "share of the audit queue is full" \
	"the flooding run's events past its share are logged only, and say so"
t "the audit chain verifies" kz-audit verify --field-key "$R/field.key" --dir "$R/audit"
done_testing
