/* Status replies as metrics (cmd/kz-metrics/collect.c). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "kz_check.h"

static const struct {
	const char *daemon;
	const char *status; /* NULL: down */
	const char *want[6]; /* lines the text must hold */
	const char *never; /* a line it must not */
} cases[] = {
    {"kz-audit", NULL, {"kz_up{daemon=\"kz-audit\"} 0"}, "kz_audit_"},
    {"kz-audit",
        "{\"acked\":7,\"last_seq\":9,\"writable\":false,"
        "\"refused_by_reason\":{\"length\":2},\"open_conns\":1}",
        {"kz_up{daemon=\"kz-audit\"} 1", "kz_audit_appends_total 7",
            "kz_audit_last_seq 9", "kz_audit_writable 0",
            "kz_audit_refusals_total{reason=\"length\"} 2",
            "kz_open_connections{daemon=\"kz-audit\"} 1"},
        NULL},
    /* Missing fields and fields of the wrong type give no sample. */
    {"kz-audit", "{\"acked\":\"7\",\"refused_by_reason\":[1]}",
        {"kz_up{daemon=\"kz-audit\"} 1"}, "kz_audit_appends_total"},
    {"kz-lease",
        "{\"warm\":2,\"leased\":1,\"admission\":true,"
        "\"resets_warm\":3,\"resets_failed\":0,"
        "\"retired_by_reason\":{\"expired\":1}}",
        {"kz_lease_workers{state=\"warm\"} 2",
            "kz_lease_workers{state=\"leased\"} 1", "kz_lease_admission_open 1",
            "kz_lease_resets_total{outcome=\"warm\"} 3",
            "kz_lease_retirements_total{reason=\"expired\"} 1"},
        NULL},
    /* A store that did not answer: no pool states, store_up 0. */
    {"kz-lease", "{\"store\":false,\"admission\":false}",
        {"kz_lease_store_up 0", "kz_lease_admission_open 0"},
        "kz_lease_workers"},
    {"kz-egress",
        "{\"mode\":\"isolated\",\"allowed\":4,"
        "\"refused_by_reason\":{\"port_not_allowed\":2,\"a\\\"b\":1}}",
        {"kz_egress_mode{mode=\"isolated\"} 1", "kz_egress_allowed_total 4",
            "kz_egress_refused_total{reason=\"port_not_allowed\"} 2",
            "kz_egress_refused_total{reason=\"a\\\"b\"} 1"},
        NULL},
    {"kz-project", "{\"store\":true,\"refused_by_code\":{\"not_owner\":5}}",
        {"kz_project_store_connected 1",
            "kz_project_refusals_total{code=\"not_owner\"} 5"},
        NULL},
    /* Nested fields: "warm.ready" is ready of the object warm. */
    {"kz-pkgrun",
        "{\"inflight\":1,\"answered_ok\":9,\"one_shot\":2,"
        "\"warm\":{\"target\":2,\"ready\":1,\"in_use\":1,"
        "\"served\":7}}",
        {"kz_pkgrun_inflight 1", "kz_pkgrun_invocations_ok_total 9",
            "kz_pkgrun_warm_workers{state=\"ready\"} 1",
            "kz_pkgrun_warm_workers{state=\"in_use\"} 1",
            "kz_pkgrun_warm_served_total 7", "kz_pkgrun_one_shot_total 2"},
        NULL},
    /* No warm object (PKGRUN_WARM=0 of an older daemon): no warm sample. */
    {"kz-pkgrun", "{\"inflight\":0,\"warm\":3}", {"kz_pkgrun_inflight 0"},
        "kz_pkgrun_warm_workers"},
    {"kz-browser",
        "{\"enabled\":true,\"sessions\":2,\"opened\":5,\"reaped\":1}",
        {"kz_browser_enabled 1", "kz_browser_sessions 2",
            "kz_browser_sessions_total{outcome=\"opened\"} 5",
            "kz_browser_sessions_total{outcome=\"reaped\"} 1"},
        NULL},
    /* A label value too long for the format is left out, the rest
     * kept (the key below is 600 bytes). */
    {"kz-audit",
        "{\"acked\":3,\"refused_by_reason\":{\"length\":1,\"LONG\":2}}",
        {"kz_audit_appends_total 3",
            "kz_audit_refusals_total{reason=\"length\"} 1"},
        "LONG"},
    /* A counter gone negative is left out, the rest kept. */
    {"kz-egress", "{\"allowed\":-1,\"bad_requests\":2}",
        {"kz_egress_bad_requests_total 2"}, "kz_egress_allowed_total"},
};

START_TEST(test_collect)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cJSON *st = NULL;
		struct mx *m;
		char *t, line[256];
		size_t n;
		int r;

		if (cases[i].status != NULL) {
			/* LONG: a key of 600 bytes. */
			char *q, *text = malloc(strlen(cases[i].status) + 600);

			ck_assert_ptr_nonnull(text);
			strcpy(text, cases[i].status);
			if ((q = strstr(text, "LONG")) != NULL) {
				memmove(q + 600, q + 4, strlen(q + 4) + 1);
				memset(q, 'x', 600);
			}
			st = cJSON_Parse(text);
			free(text);
		}
		ck_assert_int_eq(mx_new(&m), 0);
		r = mx_collect(m, cases[i].daemon, st);
		ck_assert_msg(r == 0, "case %zu", i);
		ck_assert_int_eq(mx_text(m, &t, &n), 0);
		for (size_t k = 0; k < 6 && cases[i].want[k]; k++) {
			snprintf(line, sizeof(line), "\n%s\n",
			    cases[i].want[k]);
			ck_assert_msg(strstr(t, line) != NULL,
			    "case %zu: no '%s' in\n%s", i, cases[i].want[k], t);
		}
		ck_assert_msg(cases[i].never == NULL ||
		        strstr(t, cases[i].never) == NULL,
		    "case %zu", i);
		ck_assert_msg(strstr(t, "xxxxxxxxxx") == NULL, "case %zu", i);
		free(t);
		cJSON_Delete(st);
		mx_free(m);
	}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("kz-metrics collect");
	TCase *tc = tcase_create("collect");

	tcase_add_test(tc, test_collect);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
