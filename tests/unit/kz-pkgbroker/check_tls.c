/* The upstreams' TLS: a trust file that cannot be used is refused at
 * load, and what a failed handshake showed maps to one reason each (a
 * certificate's error first; a peer that sent nothing, or a handshake
 * that was over, is not TLS's doing). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include "serve.h"
#include "kz_check.h"
#include "banned.h"

static const struct {
	struct pb_tls t;
	const char *code; /* NULL: not a TLS failure */
} cases[] = {
    {{.verr = X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY,
         .started = true,
         .nread = 900},
        "upstream_tls_untrusted"},
    {{.verr = X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT,
         .started = true,
         .nread = 900},
        "upstream_tls_untrusted"},
    {{.verr = X509_V_ERR_HOSTNAME_MISMATCH, .started = true, .nread = 900},
        "upstream_tls_name"},
    {{.verr = X509_V_ERR_IP_ADDRESS_MISMATCH, .started = true, .nread = 9},
        "upstream_tls_name"},
    {{.verr = X509_V_ERR_CERT_HAS_EXPIRED, .started = true, .nread = 900},
        "upstream_tls_expired"},
    {{.verr = X509_V_ERR_CERT_NOT_YET_VALID, .started = true, .nread = 900},
        "upstream_tls_expired"},
    {{.err = ERR_PACK(ERR_LIB_SSL, 0, SSL_R_WRONG_VERSION_NUMBER),
         .started = true,
         .nread = 5},
        "upstream_not_tls"},
    {{.err = ERR_PACK(ERR_LIB_SSL, 0, SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE),
         .started = true,
         .nread = 7},
        "upstream_tls_handshake"},
    {{.started = true, .nread = 0}, NULL}, /* refused, or closed at once */
    {{.started = false}, NULL},
    {{.started = true, .done = true, .nread = 4000}, NULL},
};

START_TEST(test_failure)
{
	const char *code = NULL, *text = NULL;
	bool is = pb_tls_failure(&cases[_i].t, &code, &text);

	if (cases[_i].code == NULL) {
		ck_assert_msg(!is, "case %d: %s", _i, code);
		return;
	}
	ck_assert_msg(is, "case %d not a TLS failure", _i);
	ck_assert_str_eq(code, cases[_i].code);
	ck_assert_ptr_null(strchr(text, '\n'));
}
END_TEST

START_TEST(test_ca_file)
{
	char why[160] = "", path[] = "/tmp/check_tls.XXXXXX";
	FILE *f;
	int fd;

	ck_assert_int_eq(pb_tls_check("", why, sizeof(why)), 0);
	ck_assert_int_eq(pb_tls_check("/nonexistent/ca.pem", why, sizeof(why)),
	    KZ_ECONF);
	ck_assert_ptr_nonnull(strstr(why, "PKGBROKER_UPSTREAM_CA"));
	ck_assert_ptr_null(strstr(why, "/nonexistent"));
	ck_assert_int_ge(fd = mkstemp(path), 0);
	ck_assert_ptr_nonnull(f = fdopen(fd, "w"));
	fputs("-----BEGIN CERTIFICATE-----\nnot base64\n"
	      "-----END CERTIFICATE-----\n",
	    f);
	fclose(f);
	ck_assert_int_eq(pb_tls_check(path, why, sizeof(why)), KZ_ECONF);
	unlink(path);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("pkgbroker_tls");
	TCase *tc = tcase_create("tls");

	tcase_add_loop_test(tc, test_failure, 0,
	    sizeof(cases) / sizeof(cases[0]));
	tcase_add_test(tc, test_ca_file);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
