/*
 * libFuzzer harness for kz-egress's host parser and classifier (addr.c):
 * the host a sandboxed client names.  Beyond not crashing:
 *   - a literal's text form (eg_addr_str) parses back to the same address;
 *   - a host taken as a name normalizes to something that is still a name
 *     (never an address in disguise) and normalizing it again changes
 *     nothing;
 *   - every address gets a class, and the effective address of an
 *     embedded IPv4 form is IPv4;
 *   - a CIDR that parses has a prefix within its family's length.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
literal(const struct eg_addr *a)
{
	struct eg_addr b, eff;
	char s[64];
	enum eg_class c;

	eg_addr_str(a, s, sizeof(s));
	if (eg_addr_parse_literal(s, &b) != 1 || !eg_addr_eq(a, &b))
		abort();
	c = eg_addr_classify(a, &eff);
	if (c >= EG_C_COUNT_ || (eff.fam != 4 && eff.fam != 6) ||
	    (!eg_addr_eq(a, &eff) && eff.fam != 4))
		abort();
	(void)eg_class_name(c);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s, n1[EG_HOST_MAX + 1], n2[EG_HOST_MAX + 1];
	struct eg_addr a;
	struct eg_cidr c;
	int r;

	if (size > 512 || memchr(data, '\0', size) != NULL)
		return 0;
	if ((s = malloc(size + 1)) == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	r = eg_addr_parse_literal(s, &a);
	if (r == 1)
		literal(&a);
	else if (r == 0 && eg_name_normalize(s, n1, sizeof(n1)) == 0) {
		if (eg_addr_parse_literal(n1, &a) != 0 ||
		    eg_name_normalize(n1, n2, sizeof(n2)) != 0 ||
		    strcmp(n1, n2) != 0)
			abort();
	} else if (r != 0 && r != KZ_EINVAL) {
		abort();
	}
	if (eg_cidr_parse(s, &c) == 0) {
		if (c.plen < 0 || c.plen > (c.a.fam == 4 ? 32 : 128))
			abort();
		(void)eg_cidr_match(&c, &c.a);
		if (!eg_cidr_match(&c, &c.a))
			abort();
	}
	free(s);
	return 0;
}
