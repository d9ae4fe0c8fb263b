/*
 * The seccomp filter every worker and one-shot run loads: the programs
 * libseccomp compiled from seccomp_table.c's tables when kz-sandbox was
 * built (gen/filter_gen.c), embedded here.  The filter depends on nothing but
 * those tables and the architecture, so compiling it again at every start
 * (about 5 ms of CPU) bought nothing; check_seccomp proves the embedded
 * programs are what libseccomp compiles from the tables now.
 */
#include <stdlib.h>
#include <string.h>

#include "sbx.h"
#include "sbx_filter.h"
#include "banned.h"

_Static_assert(sizeof(sbx_filter_code) / sizeof(struct sock_filter) <=
            BPF_MAXINSNS &&
        sizeof(sbx_filter_rtnl) / sizeof(struct sock_filter) <= BPF_MAXINSNS,
    "a seccomp program longer than the kernel loads");

int
sbx_seccomp_build(struct sock_fprog *out, bool rtnl, char *why, size_t wlen)
{
	const struct sock_filter *f = rtnl ? sbx_filter_rtnl : sbx_filter_code;
	size_t n = rtnl ? sizeof(sbx_filter_rtnl) / sizeof(*f) :
	                  sizeof(sbx_filter_code) / sizeof(*f);

	memset(out, 0, sizeof(*out));
	if ((out->filter = malloc(n * sizeof(*f))) == NULL) {
		kz_why(why, wlen, "seccomp: out of memory");
		return KZ_ENOMEM;
	}
	memcpy(out->filter, f, n * sizeof(*f));
	out->len = (unsigned short)n;
	return 0;
}
