/*
 * kz-sandbox gvisor.c: the OCI spec runsc gets is made from the worker's
 * own configuration (ids, limits, capabilities, root view, network), and
 * the runtime keys are checked before anything starts.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx.h"
#include "sbx_gvisor.h"
#include "kz_check.h"
#include "banned.h"

static cJSON *
spec(struct sbx_conf *c)
{
	return sbx_gv_spec(c, "/run/kz-sandbox/w1/root", "/st/w1.runsc/f");
}

static const cJSON *
get(const cJSON *o, const char *path)
{
	char buf[128], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *k = strtok_r(buf, ".", &save); k != NULL && o != NULL;
	     k = strtok_r(NULL, ".", &save))
		o = cJSON_GetObjectItemCaseSensitive(o, k);
	return o;
}

START_TEST(test_process)
{
	struct sbx_conf c;
	cJSON *s;
	const cJSON *caps, *e;

	sbx_conf_defaults(&c);
	c.uid = 2100000123, c.gid = 2100000456;
	ck_assert_ptr_nonnull(s = spec(&c));
	/* The loader starts as gVisor's root and hands the code the
	 * sandbox ids, which it takes from its arguments; each job brings
	 * its own argv, environment and directory. */
	ck_assert_int_eq(get(s, "process.user.uid")->valuedouble, 0);
	ck_assert_int_eq(get(s, "process.user.gid")->valuedouble, 0);
	ck_assert_str_eq(get(s, "process.cwd")->valuestring, "/workspace");
	ck_assert(cJSON_IsTrue(get(s, "process.noNewPrivileges")));
	ck_assert(cJSON_IsFalse(get(s, "process.terminal")));
	ck_assert_int_eq(cJSON_GetArraySize(get(s, "process.args")), 4);
	ck_assert_str_eq(cJSON_GetArrayItem(get(s, "process.args"), 0)
	                     ->valuestring,
	    SBX_GV_LOADER);
	ck_assert_str_eq(cJSON_GetArrayItem(get(s, "process.args"), 1)
	                     ->valuestring,
	    "gvisor-serve");
	ck_assert_str_eq(cJSON_GetArrayItem(get(s, "process.args"), 2)
	                     ->valuestring,
	    "2100000123");
	ck_assert_str_eq(cJSON_GetArrayItem(get(s, "process.args"), 3)
	                     ->valuestring,
	    "2100000456");
	/* No worker secret in the loader's environment: a PATH only. */
	ck_assert_int_eq(cJSON_GetArraySize(get(s, "process.env")), 1);
	ck_assert_str_eq(cJSON_GetArrayItem(get(s, "process.env"), 0)
	                     ->valuestring,
	    "PATH=/usr/sbin:/usr/bin:/sbin:/bin");
	/* The loader's sets hold only what the drop to the sandbox ids and
	 * the end of a run need; nothing is inheritable or ambient. */
	caps = get(s, "process.capabilities");
	ck_assert_int_eq(cJSON_GetArraySize(caps), 5);
	cJSON_ArrayForEach(e, caps)
	{
		const cJSON *n;
		bool none = strcmp(e->string, "inheritable") == 0 ||
		    strcmp(e->string, "ambient") == 0;

		ck_assert(cJSON_IsArray(e));
		ck_assert_int_eq(cJSON_GetArraySize(e), none ? 0 : 4);
		cJSON_ArrayForEach(n, e)
		    ck_assert(strcmp(n->valuestring, "CAP_SETUID") == 0 ||
		        strcmp(n->valuestring, "CAP_SETGID") == 0 ||
		        strcmp(n->valuestring, "CAP_SETPCAP") == 0 ||
		        strcmp(n->valuestring, "CAP_KILL") == 0);
	}
	cJSON_Delete(s);
}
END_TEST

START_TEST(test_rlimits_same)
{
	struct sbx_conf c;
	struct sbx_rlimit l[SBX_RLIMIT_N];
	const cJSON *a, *e;
	cJSON *s;
	int n = 0;

	sbx_conf_defaults(&c);
	c.nofile = 333, c.fsize = 7 << 20;
	sbx_rlimit_list(&c, l);
	ck_assert_ptr_nonnull(s = spec(&c));
	a = get(s, "process.rlimits");
	ck_assert_int_eq(cJSON_GetArraySize(a), SBX_RLIMIT_N);
	cJSON_ArrayForEach(e, a)
	{
		char type[32];

		snprintf(type, sizeof(type), "RLIMIT_%s", l[n].name);
		ck_assert_str_eq(get(e, "type")->valuestring, type);
		ck_assert(get(e, "hard")->valuedouble == (double)l[n].v);
		ck_assert(get(e, "soft")->valuedouble == (double)l[n].v);
		n++;
	}
	ck_assert_str_eq(l[0].name, "NOFILE");
	ck_assert_uint_eq(l[0].v, 333);
	ck_assert_uint_eq(l[1].v, 7 << 20);
	cJSON_Delete(s);
}
END_TEST

/* The root is the view (read-only on the host: the spec does not mark it
 * so, see gvisor.c); the writable places are the view's own tmpfs
 * instances; nothing else of the host is named. */
START_TEST(test_root_mounts)
{
	struct sbx_conf c;
	const cJSON *m;
	cJSON *s;
	int rw = 0;

	sbx_conf_defaults(&c);
	ck_assert_ptr_nonnull(s = spec(&c));
	ck_assert_str_eq(get(s, "root.path")->valuestring,
	    "/run/kz-sandbox/w1/root");
	ck_assert(cJSON_IsFalse(get(s, "root.readonly")));
	ck_assert_str_eq(get(s, "hostname")->valuestring, "sandbox");
	cJSON_ArrayForEach(m, get(s, "mounts"))
	{
		const char *type = get(m, "type")->valuestring;
		const char *src = get(m, "source")->valuestring;
		const char *dst = get(m, "destination")->valuestring;
		char want[256];

		if (strcmp(type, "bind") != 0)
			continue;
		if (strcmp(dst, SBX_GV_FILTER) == 0) {
			ck_assert_str_eq(src, "/st/w1.runsc/f");
			continue;
		}

		snprintf(want, sizeof(want), "/run/kz-sandbox/w1/root%s", dst);
		ck_assert_str_eq(src, want);
		rw++;
	}
	ck_assert_int_eq(rw, 3);
	ck_assert_ptr_null(get(s, "linux.cgroupsPath"));
	cJSON_Delete(s);
}
END_TEST

/* The projection is a mount of its own, read-only, so gVisor revalidates
 * it (a sandbox kept for the lease sees the host's changes). */
START_TEST(test_projection_mount)
{
	struct sbx_conf c;
	const cJSON *m, *o;
	cJSON *s;
	int found = 0;

	sbx_conf_defaults(&c);
	ck_assert_ptr_nonnull(s = spec(&c));
	cJSON_ArrayForEach(m, get(s, "mounts"))
	    ck_assert_str_ne(get(m, "destination")->valuestring, SBX_PROJ);
	cJSON_Delete(s);
	snprintf(c.projection, sizeof(c.projection), "/srv/proj");
	ck_assert_ptr_nonnull(s = spec(&c));
	cJSON_ArrayForEach(m, get(s, "mounts"))
	{
		bool ro = false;

		if (strcmp(get(m, "destination")->valuestring, SBX_PROJ) != 0)
			continue;
		found++;
		ck_assert_str_eq(get(m, "source")->valuestring,
		    "/run/kz-sandbox/w1/root" SBX_PROJ);
		cJSON_ArrayForEach(o, get(m, "options"))
		{
			ck_assert_str_ne(o->valuestring, "rw");
			ro |= strcmp(o->valuestring, "ro") == 0;
		}
		ck_assert(ro);
	}
	ck_assert_int_eq(found, 1);
	cJSON_Delete(s);
}
END_TEST

static bool
has_netns(const cJSON *s)
{
	const cJSON *n;

	cJSON_ArrayForEach(n,
	    get(s, "linux.namespaces")) if (strcmp(get(n, "type")->valuestring,
	                                        "network") == 0) return true;
	return false;
}

/* A network namespace of gVisor's own (loopback only), with or without
 * the relay or the broker forward, which the loader forwards to. */
START_TEST(test_network)
{
	struct sbx_conf c;
	cJSON *s;

	sbx_conf_defaults(&c);
	ck_assert_ptr_nonnull(s = spec(&c));
	ck_assert(has_netns(s));
	cJSON_Delete(s);
	snprintf(c.egress_sock, sizeof(c.egress_sock), "/run/kz/egress.sock");
	snprintf(c.broker_sock, sizeof(c.broker_sock), "/run/kz/broker.sock");
	ck_assert_ptr_nonnull(s = spec(&c));
	ck_assert(has_netns(s));
	cJSON_Delete(s);
}
END_TEST

/* id's entries in the spec's map name: [0, 0] and [id, runsc's nobody],
 * one id each, and nothing else. */
static void
check_idmap(const cJSON *s, const char *name, int64_t id)
{
	const cJSON *a = get(s, name), *e;
	const double in[] = {0, (double)id}, out[] = {0, SBX_GV_NOBODY};
	int i = 0;

	ck_assert_int_eq(cJSON_GetArraySize(a), 2);
	cJSON_ArrayForEach(e, a)
	{
		ck_assert(get(e, "containerID")->valuedouble == in[i]);
		ck_assert(get(e, "hostID")->valuedouble == out[i]);
		ck_assert(get(e, "size")->valuedouble == 1);
		i++;
	}
}

/* The gofer's user namespace:
 * made by runsc inside its own, where runsc's nobody is the host's
 * sandbox ids (ns.c), so the sandbox ids are themselves there. */
START_TEST(test_userns_maps)
{
	struct sbx_conf c;
	const cJSON *n;
	cJSON *s;
	int users = 0;

	sbx_conf_defaults(&c);
	c.uid = 2100000017, c.gid = 2100000019;
	for (int net = 0; net < 2; net++) {
		if (net)
			snprintf(c.egress_sock, sizeof(c.egress_sock),
			    "/run/kz/egress.sock");
		ck_assert_ptr_nonnull(s = spec(&c));
		users = 0;
		cJSON_ArrayForEach(n, get(s, "linux.namespaces"))
		{
			if (strcmp(get(n, "type")->valuestring, "user") != 0)
				continue;
			ck_assert_ptr_null(get(n, "path"));
			users++;
		}
		ck_assert_int_eq(users, 1);
		check_idmap(s, "linux.uidMappings", 2100000017);
		check_idmap(s, "linux.gidMappings", 2100000019);
		cJSON_Delete(s);
	}
}
END_TEST

static const struct {
	const char *key, *val;
	bool ok;
} kcases[] = {
    {"runtime", "native", true},
    {"runtime", "gvisor", true},
    {"runtime", "runc", false},
    {"runtime", "", false},
    {"gvisor-platform", "ptrace", true},
    {"gvisor-platform", "kvm", true},
    {"gvisor-platform", "systrap", true},
    {"gvisor-platform", "none", false},
    {"runsc", "/usr/bin/runsc", true},
    {"runsc", "runsc", false},
    {"runsc", "/usr/../bin/runsc", false},
};

START_TEST(test_keys)
{
	struct sbx_conf c;
	char why[256];
	int r;

	sbx_conf_defaults(&c);
	ck_assert_str_eq(c.runtime, "native");
	ck_assert_str_eq(c.gv_platform, "ptrace");
	ck_assert_str_eq(c.runsc, "/usr/bin/runsc");
	r = sbx_conf_opt(&c, kcases[_i].key, kcases[_i].val, why, sizeof(why));
	ck_assert_int_eq(r, 0);
	r = sbx_conf_check(&c, why, sizeof(why));
	ck_assert_msg((r == 0) == kcases[_i].ok, "%s=%s: %s", kcases[_i].key,
	    kcases[_i].val, why);
}
END_TEST

/* A policy part runsc cannot apply is refused, never dropped. */
START_TEST(test_userns_refused)
{
	struct sbx_conf c;
	char why[256];

	sbx_conf_defaults(&c);
	ck_assert_int_eq(sbx_conf_opt(&c, "runtime", "gvisor", why,
	                     sizeof(why)),
	    0);
	ck_assert_int_eq(sbx_conf_opt(&c, "userns", "on", why, sizeof(why)), 0);
	ck_assert_int_ne(sbx_conf_check(&c, why, sizeof(why)), 0);
	ck_assert_ptr_nonnull(strstr(why, "gvisor"));
}
END_TEST

/* runsc's second ids: both or neither, never the sandbox's or nobody's. */
START_TEST(test_gvisor_ids)
{
	static const struct {
		const char *uid, *gid;
		int ok;
	} v[] = {{"0", "0", 1}, {"2100000005", "2100000005", 1},
	    {"2100000005", "0", 0}, {"0", "2100000005", 0},
	    {"2100000000", "2100000005", 0}, {"2100000005", "2100000000", 0},
	    {"65534", "65534", 0}};
	struct sbx_conf c;
	char why[256];

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		sbx_conf_defaults(&c);
		ck_assert_int_eq(sbx_conf_opt(&c, "runtime", "gvisor", why,
		                     sizeof(why)),
		    0);
		ck_assert_int_eq(sbx_conf_opt(&c, "gvisor-uid", v[i].uid, why,
		                     sizeof(why)),
		    0);
		ck_assert_int_eq(sbx_conf_opt(&c, "gvisor-gid", v[i].gid, why,
		                     sizeof(why)),
		    0);
		why[0] = '\0';
		/* The view's own checks may fail here, not these. */
		if (v[i].ok)
			ck_assert_msg(sbx_conf_check(&c, why, sizeof(why)) ==
			            0 ||
			        strstr(why, "SANDBOX_GVISOR") == NULL,
			    "%s", why);
		else
			ck_assert_msg(sbx_conf_check(&c, why, sizeof(why)) !=
			            0 &&
			        strstr(why, "SANDBOX_GVISOR_UID") != NULL,
			    "%s/%s accepted", v[i].uid, v[i].gid);
	}
}
END_TEST

START_TEST(test_binary)
{
	struct sbx_conf c;
	char why[256], d[] = "/tmp/kz-gv-XXXXXX", p[64];
	FILE *f;

	sbx_conf_defaults(&c);
	ck_assert_ptr_nonnull(mkdtemp(d));
	snprintf(c.runsc, sizeof(c.runsc), "%s/none", d);
	ck_assert_int_ne(sbx_gv_binary(&c, why, sizeof(why)), 0);
	ck_assert_ptr_nonnull(strstr(why, "gvisor: runsc"));
	snprintf(p, sizeof(p), "%s/plain", d);
	ck_assert_ptr_nonnull(f = fopen(p, "w"));
	fclose(f);
	snprintf(c.runsc, sizeof(c.runsc), "%s", p);
	ck_assert_int_ne(sbx_gv_binary(&c, why, sizeof(why)), 0);
	ck_assert_int_eq(chmod(p, 0755), 0);
	ck_assert_int_eq(sbx_gv_binary(&c, why, sizeof(why)), 0);
	snprintf(c.runsc, sizeof(c.runsc), "%s", d);
	ck_assert_int_ne(sbx_gv_binary(&c, why, sizeof(why)), 0);
	unlink(p);
	rmdir(d);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("sandbox-gvisor");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_process);
	tcase_add_test(tc, test_rlimits_same);
	tcase_add_test(tc, test_root_mounts);
	tcase_add_test(tc, test_projection_mount);
	tcase_add_test(tc, test_network);
	tcase_add_test(tc, test_userns_maps);
	tcase_add_loop_test(tc, test_keys, 0,
	    sizeof(kcases) / sizeof(kcases[0]));
	tcase_add_test(tc, test_userns_refused);
	tcase_add_test(tc, test_gvisor_ids);
	tcase_add_test(tc, test_binary);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
