/* The strict IP-literal parser and the special-purpose classifier: every
 * spelling a resolver or URL parser accepts, and a table of ranges from the
 * IANA IPv4 and IPv6 special-purpose registries. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "egress.h"
#include "kz_check.h"
#include "banned.h"

/* host, expected: 1 literal (address text), 0 a name, -1 refused */
static const struct {
	const char *in;
	int lit;
	const char *addr;
} literals[] = {
    {"127.0.0.1", 1, "127.0.0.1"},
    {"127.1", 1, "127.0.0.1"},
    {"127.0.1", 1, "127.0.0.1"},
    {"2130706433", 1, "127.0.0.1"},
    {"0x7f000001", 1, "127.0.0.1"},
    {"0X7F.1", 1, "127.0.0.1"},
    {"017700000001", 1, "127.0.0.1"},
    {"0177.0.0.01", 1, "127.0.0.1"},
    {"0x7f.0x0.0x0.0x1", 1, "127.0.0.1"},
    {"127.0.0.1.", 1, "127.0.0.1"},
    {"169.254.43518", 1, "169.254.169.254"},
    {"0xa9fea9fe", 1, "169.254.169.254"},
    {"0", 1, "0.0.0.0"},
    {"0x", -1, NULL}, /* libc reads no number: refused */
    {"0x.1", -1, NULL},
    {"1.0x", -1, NULL},
    {"10.213.0.2", 1, "10.213.0.2"},
    {"[::1]", 1, "::1"},
    {"::1", 1, "::1"},
    {"[0:0:0:0:0:0:0:1]", 1, "::1"},
    {"[::ffff:127.0.0.1]", 1, "::ffff:127.0.0.1"},
    {"[::ffff:7f00:1]", 1, "::ffff:127.0.0.1"},
    {"[fe80::1%25eth0]", 1, "fe80::1"},
    {"[fe80::1%eth0]", 1, "fe80::1"},
    {"fe80::1%lo", 1, "fe80::1"},
    {"1.2.3.256", -1, NULL},
    {"256.1.1.1", -1, NULL},
    {"1.2.3.4.5", -1, NULL},
    {"1..2.3", -1, NULL},
    {"08.1.1.1", -1, NULL},
    {"0x1g.1", -1, NULL}, /* ends in a number: IPv4 or nothing */
    {"4294967296", -1, NULL},
    {"99999999999999999999", -1, NULL},
    /* A last label that is a number of any length is an address or is
     * refused, never a name sent to DNS. */
    {"0x41414141A9FEA9FE", -1, NULL},
    {"1.0x100000000", -1, NULL},
    {"0x1a9fea9fe", -1, NULL},
    {"0X1A9FEA9FE.", -1, NULL},
    {"0x100000000", -1, NULL},
    {"1.2.3.0x100", -1, NULL},
    {"example.0x1ffffffffffffffffffff", -1, NULL},
    {"example.0x", -1, NULL},
    {"example.0777777777777777777777", -1, NULL},
    {"example.99999999999999999999", -1, NULL},
    {"0x00000000000000007f000001", 1, "127.0.0.1"},
    {"00000000000000000000177.1", 1, "127.0.0.1"},
    {"[::1", -1, NULL},
    {"[1.2.3.4]", -1, NULL},
    {"[::1%]", -1, NULL},
    {"[::1%25]", -1, NULL},
    {":::1", -1, NULL},
    {"[::1]x", -1, NULL},
    {"example.com", 0, NULL},
    {"1.2.3.example", 0, NULL},
    {"0x7f.example", 0, NULL},
    {"example.0x1g", 0, NULL}, /* not hex: a name */
    {"example.1a", 0, NULL},
    {"", -1, NULL},
};

START_TEST(test_literals)
{
	for (size_t i = 0; i < sizeof(literals) / sizeof(literals[0]); i++) {
		struct eg_addr a;
		char s[64];
		int r = eg_addr_parse_literal(literals[i].in, &a);

		if (literals[i].lit < 0)
			ck_assert_msg(r < 0, "%s: got %d", literals[i].in, r);
		else
			ck_assert_msg(r == literals[i].lit, "%s: got %d",
			    literals[i].in, r);
		if (r == 1) {
			eg_addr_str(&a, s, sizeof(s));
			ck_assert_msg(strcmp(s, literals[i].addr) == 0,
			    "%s: got %s", literals[i].in, s);
		}
	}
}
END_TEST

static const struct {
	const char *in, *out; /* out NULL: refused */
} names[] = {
    {"Example.COM", "example.com"},
    {"example.com.", "example.com"},
    {"a_b.example", "a_b.example"},
    {"xn--bcher-kva.example", "xn--bcher-kva.example"},
    {"ex ample.com", NULL},
    {"user@example.com", NULL},
    {"example..com", NULL},
    {".example.com", NULL},
    {"example.com..", NULL},
    {"ex%41mple.com", NULL},
    {"b\xc3\xbc"
     "cher.example",
        NULL},
    {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.x",
        NULL},
};

START_TEST(test_names)
{
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char out[EG_HOST_MAX + 1];
		int r = eg_name_normalize(names[i].in, out, sizeof(out));

		if (names[i].out == NULL) {
			ck_assert_msg(r != 0, "%s accepted", names[i].in);
		} else {
			ck_assert_msg(r == 0, "%s refused", names[i].in);
			ck_assert_str_eq(out, names[i].out);
		}
	}
}
END_TEST

static const struct {
	const char *addr, *cls;
} classes[] = {
    {"0.0.0.0", "unspecified"},
    {"0.1.2.3", "unspecified"},
    {"10.0.0.1", "private_use"},
    {"100.64.0.1", "shared_address"},
    {"100.100.100.200", "metadata"},
    {"127.0.0.1", "loopback"},
    {"127.255.255.254", "loopback"},
    {"169.254.1.1", "link_local"},
    {"169.254.169.254", "metadata"},
    {"169.254.170.2", "metadata"},
    {"168.63.129.16", "metadata"},
    {"172.16.0.1", "private_use"},
    {"172.31.255.255", "private_use"},
    {"172.32.0.1", "public"},
    {"192.0.0.1", "protocol_assignment"},
    {"192.0.0.9", "public"},
    {"192.0.0.10", "public"},
    {"192.0.2.1", "documentation"},
    {"192.88.99.1", "reserved"},
    {"192.168.1.1", "private_use"},
    {"198.18.0.1", "benchmarking"},
    {"198.19.255.255", "benchmarking"},
    {"198.51.100.7", "documentation"},
    {"203.0.113.7", "documentation"},
    {"224.0.0.1", "multicast"},
    {"239.255.255.250", "multicast"},
    {"240.0.0.1", "reserved"},
    {"255.255.255.255", "broadcast"},
    {"8.8.8.8", "public"},
    {"1.1.1.1", "public"},
    {"::", "unspecified"},
    {"::1", "loopback"},
    {"::ffff:127.0.0.1", "loopback"},
    {"::ffff:169.254.169.254", "metadata"},
    {"::ffff:8.8.8.8", "public"},
    {"::127.0.0.1", "loopback"},
    {"::10.0.0.1", "private_use"},
    {"64:ff9b::7f00:1", "loopback"},
    {"64:ff9b::808:808", "public"},
    {"64:ff9b:1::1", "local_nat64"},
    {"100::1", "discard_only"},
    {"2001:db8::1", "documentation"},
    {"2001:2::1", "benchmarking"},
    {"2001:10::1", "protocol_assignment"},
    {"2001:20::1", "public"},
    {"2001:4860:4860::8888", "public"},
    {"2002:7f00:1::", "loopback"},
    {"2002:a9fe:a9fe::1", "metadata"},
    {"2002:808:808::1", "public"},
    /* Teredo: client 127.0.0.1 obfuscated as 80ff:fffe */
    {"2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback"},
    /* Teredo: server 10.0.0.1, client public */
    {"2001:0:a00:1:8000:63bf:f7f7:f7f7", "private_use"},
    {"2001:0:808:808:8000:63bf:f7f7:f7f7", "public"},
    {"3fff::1", "documentation"},
    {"5f00::1", "reserved"},
    {"fc00::1", "unique_local"},
    {"fd00:ec2::254", "metadata"},
    {"fe80::1", "link_local"},
    {"febf::1", "link_local"},
    {"fec0::1", "site_local"},
    {"ff02::1", "multicast"},
    {"4000::1", "reserved"},
    {"1::", "reserved"},
};

START_TEST(test_classes)
{
	for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++) {
		struct eg_addr a, eff;
		enum eg_class c;

		ck_assert_msg(eg_addr_parse_literal(classes[i].addr, &a) == 1,
		    "%s does not parse", classes[i].addr);
		c = eg_addr_classify(&a, &eff);
		ck_assert_msg(strcmp(eg_class_name(c), classes[i].cls) == 0,
		    "%s: got %s, want %s", classes[i].addr, eg_class_name(c),
		    classes[i].cls);
	}
}
END_TEST

START_TEST(test_cidr)
{
	struct eg_cidr c;
	struct eg_addr a;

	ck_assert_int_eq(eg_cidr_parse("10.213.0.0/30", &c), 0);
	ck_assert_int_eq(eg_addr_parse_literal("10.213.0.2", &a), 1);
	ck_assert(eg_cidr_match(&c, &a));
	ck_assert_int_eq(eg_addr_parse_literal("10.213.0.4", &a), 1);
	ck_assert(!eg_cidr_match(&c, &a));
	ck_assert_int_eq(eg_cidr_parse("fc00::/7", &c), 0);
	ck_assert_int_eq(eg_addr_parse_literal("fdff::1", &a), 1);
	ck_assert(eg_cidr_match(&c, &a));
	ck_assert_int_ne(eg_cidr_parse("10.213.0.0/33", &c), 0);
	ck_assert_int_ne(eg_cidr_parse("010.1.1.1/8", &c), 0);
	ck_assert_int_ne(eg_cidr_parse("10.1/8", &c), 0);
	ck_assert_int_ne(eg_cidr_parse("/8", &c), 0);
	ck_assert_int_ne(eg_cidr_parse("10.0.0.0/", &c), 0);
	ck_assert_int_ne(eg_cidr_parse("10.0.0.0/-1", &c), 0);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("egress_addr");
	TCase *tc = tcase_create("addr");

	tcase_add_test(tc, test_literals);
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_classes);
	tcase_add_test(tc, test_cidr);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
