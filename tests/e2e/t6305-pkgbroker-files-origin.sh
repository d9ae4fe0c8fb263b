#!/usr/bin/env bash
# A Python index whose files live on another origin (pypi.org's are on
# files.pythonhosted.org): with PKGBROKER_PYPI_FILES_UPSTREAM naming that
# origin, the broker offers them under its own /pyfiles/ paths and pip
# installs through it; without it, or for a file on any third origin,
# nothing of theirs is offered.  Both servers are real ones on loopback.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/pkgbroker/lib.sh"
plan 9
PB_BIG=0
pb_keys
pb_audit_start || { echo "Bail out! kz-audit did not start"; exit 1; }
pb_py_build || { echo "Bail out! the wheels were not built"; exit 1; }

# The files origin serves the wheels under /packages/; the index links
# them by absolute URL there (kzbeta's also from a third origin, which is
# never offered).
FILES_PORT=$(pb_port)
FILES_URL=http://127.0.0.1:$FILES_PORT
OTHER_URL=http://127.0.0.1:$(pb_port)
mkdir -p "$T/filesroot/packages" "$T/idx/simple"
cp "$T"/wheels/*.whl "$T/filesroot/packages/"
printf '<a href="kzalpha/">kzalpha</a>\n<a href="kzbeta/">kzbeta</a>\n' >"$T/idx/simple/index.html"
for w in "$T"/wheels/*.whl; do
	f=$(basename "$w"); name=${f%%-*}
	mkdir -p "$T/idx/simple/$name"
	{
		printf '<a href="%s/packages/%s#sha256=%s">%s</a>\n' "$FILES_URL" "$f" \
			"$(sha256sum "$w" | cut -d' ' -f1)" "$f"
		printf '<a href="%s/packages/%s">elsewhere</a>\n' "$OTHER_URL" "${f/1.0/2.0}"
	} >"$T/idx/simple/$name/index.html"
done
bg "$PB_PY" -m http.server --bind 127.0.0.1 --directory "$T/filesroot" "$FILES_PORT"
IDX_PORT=$(pb_port)
bg "$PB_PY" -m http.server --bind 127.0.0.1 --directory "$T/idx" "$IDX_PORT"
pb_wait_http "$FILES_URL/packages/" 20 && pb_wait_http "http://127.0.0.1:$IDX_PORT/simple/" 20 ||
	{ echo "Bail out! the test servers did not start"; exit 1; }
PB_PY_URL=http://127.0.0.1:$IDX_PORT
pb_broker_start "PKGBROKER_PYPI_FILES_UPSTREAM = $FILES_URL" ||
	{ echo "Bail out! kz-pkgbroker did not start"; exit 1; }
TOK=$(kz-pkgbroker token --field-key "$PB_KEY" --run files-run --ttl 300)
AUTH="Authorization: Bearer $TOK"

R=$(curl -s -H "$AUTH" "$PB_URL/simple/kzalpha/")
like "$R" "href=\"/pyfiles/packages/kzalpha-1.0-py3-none-any.whl#sha256=" \
	"a file on the files origin is offered under the broker's /pyfiles/"
unlike "$R" "127.0.0.1:$FILES_PORT|2\\.0" "neither that origin nor the third one's file is in the page"
pipi() { # pipi PORT: install kzalpha through the broker at PORT
	rm -rf "$T/py"
	PIP_CONFIG_FILE=/dev/null PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
		"$PB_PY" -m pip install -q --target "$T/py" \
		--index-url "http://__token__:$TOK@127.0.0.1:$1/simple/" kzalpha 2>&1 | tail -2
}
pipi "$PB_PORT" >"$T/pip1"
R=$(PYTHONPATH=$T/py "$PB_PY" -c 'import kzalpha, kzbeta; print("imported", kzalpha.VALUE, kzbeta.VALUE)' 2>&1)
is "$R" "imported kzalpha-1.0 kzbeta-1.0" "pip installs files from the files origin through the broker"
R=$(curl -s -o /dev/null -w '%{http_code}' -H "$AUTH" "$PB_URL/pyfiles/packages/kzbeta-1.0-py3-none-any.whl")
is "$R" 200 "a /pyfiles/ path is fetched from the files origin"
R=$(curl -s -o /dev/null -w '%{http_code}' "$PB_URL/pyfiles/packages/kzbeta-1.0-py3-none-any.whl")
is "$R" 401 "... and needs the run's token like every path"

# Without the files origin: nothing on another origin is offered.
kill "$PB_PID"; wait "$PB_PID" 2>/dev/null
pb_broker_start || { echo "Bail out! kz-pkgbroker did not restart"; exit 1; }
R=$(curl -s -H "$AUTH" "$PB_URL/simple/kzalpha/")
unlike "$R" "kzalpha-1.0" "without PKGBROKER_PYPI_FILES_UPSTREAM the page offers no file of another origin"
pipi "$PB_PORT" >"$T/pip2"
t "and pip finds nothing to install" test ! -e "$T/py/kzalpha"
R=$(curl -s -i -H "$AUTH" "$PB_URL/pyfiles/packages/kzbeta-1.0-py3-none-any.whl" | head -1)
like "$R" "^HTTP/1.1 404 this registry path is not configured" "and /pyfiles/ is a path not configured"

# A files upstream with a path, or without an index, is refused at start.
printf 'PKGBROKER_PYPI_UPSTREAM = %s\nPKGBROKER_PYPI_FILES_UPSTREAM = %s/sub\nPKGBROKER_PUBLIC_KEY_FILE = %s\n' \
	"$PB_PY_URL" "$FILES_URL" "$T/pb.pub" >"$T/bad.conf"
R=$(kz-pkgbroker check --config "$T/bad.conf" 2>&1)
like "$R" "PKGBROKER_PYPI_FILES_UPSTREAM must be an origin" "a files upstream with a path is refused with its reason"
done_testing
