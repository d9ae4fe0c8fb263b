/*
 * libFuzzer harness for kz-egress's judging of a raw DNS answer (dns.c,
 * eg_dns_judge): the bytes a resolver, or whoever can answer in its
 * place, sends back.  The first input byte picks the family (A or AAAA)
 * and whether a second answer of the other family follows; the rest is
 * the answer.  Beyond not crashing:
 *   - never more than EG_ANS_MAX answers are kept;
 *   - a settled verdict that allows the name pins one of the answers it
 *     kept, of family 4 or 6.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "egress.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct eg_policy *pol;
static struct eg_dest dest;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char pk[64];
	FILE *f;

	(void)argc, (void)argv;
	snprintf(pk, sizeof(pk), "/tmp/kz-fuzz-dnspk.%d", (int)getpid());
	if ((f = fopen(pk, "w")) == NULL)
		abort();
	fputs("be6ba96ccd5e7d69d57f27b578f292d37e460d4402786403eea4ef1774b7695a"
	      "\n",
	    f);
	fclose(f);
	for (int i = 0; eg_conf_keys[i] != NULL; i++)
		unsetenv(eg_conf_keys[i]);
	setenv("SANDBOX_EGRESS_MODE", "public_internet", 1);
	setenv("SANDBOX_EGRESS_PUBLIC_KEY_FILE", pk, 1);
	setenv("SANDBOX_EGRESS_RESOLVER", "127.0.0.1:53", 1);
	setenv("SANDBOX_EGRESS_LISTEN", "127.0.0.1:3128", 1);
	if (eg_policy_load(NULL, NULL, NULL, &pol) != 0 ||
	    eg_dest_init(&dest, "cdn.example", 443, true, 0) != EG_R_NONE)
		abort();
	unlink(pk);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct eg_verdict v;
	int fam;
	bool ok;
	size_t i;

	if (size < 1)
		return 0;
	memset(&v, 0, sizeof(v));
	fam = data[0] & 1 ? 6 : 4;
	ok = eg_dns_judge(&v, pol, &dest, fam, data + 1, size - 1);
	/* The same bytes once more as the other family, as the second
	 * answer of one lookup. */
	if (data[0] & 2)
		ok = eg_dns_judge(&v, pol, &dest, fam == 4 ? 6 : 4, data + 1,
		         size - 1) &&
		    ok;
	if (v.nanswers > EG_ANS_MAX)
		abort();
	eg_dns_settle(&v, !ok);
	if (v.reason == EG_R_NONE) {
		if (v.pinned.fam != 4 && v.pinned.fam != 6)
			abort();
		for (i = 0; i < v.nanswers; i++)
			if (eg_addr_eq(&v.answers[i], &v.pinned))
				break;
		if (i == v.nanswers)
			abort();
	}
	return 0;
}
