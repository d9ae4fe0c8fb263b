/*
 * restrict_af FAMILY[,FAMILY...] CMD [ARG...]: runs CMD with socket(2) and
 * socketpair(2) failing EAFNOSUPPORT for every address family but those
 * named (AF_UNIX, AF_INET, AF_INET6, AF_NETLINK), as systemd's
 * RestrictAddressFamilies= does, so a test can run a daemon under the
 * families its unit allows.
 */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const struct {
	const char *name;
	int af;
} names[] = {{"AF_UNIX", AF_UNIX}, {"AF_INET", AF_INET}, {"AF_INET6", AF_INET6},
    {"AF_NETLINK", AF_NETLINK}};

int
main(int argc, char **argv)
{
	char allowed[AF_MAX] = {0}, list[256], *tok, *save = NULL;
	scmp_filter_ctx ctx;

	if (argc < 3 || strlen(argv[1]) >= sizeof(list)) {
		fprintf(stderr,
		    "usage: restrict_af FAMILY[,...] CMD [ARG...]\n");
		return 2;
	}
	strcpy(list, argv[1]);
	for (tok = strtok_r(list, ", ", &save); tok != NULL;
	     tok = strtok_r(NULL, ", ", &save)) {
		size_t i;

		for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (strcmp(tok, names[i].name) == 0)
				break;
		if (i == sizeof(names) / sizeof(names[0])) {
			fprintf(stderr, "restrict_af: unknown family %s\n",
			    tok);
			return 2;
		}
		allowed[names[i].af] = 1;
	}
	if ((ctx = seccomp_init(SCMP_ACT_ALLOW)) == NULL)
		return 1;
	for (int af = 0; af < AF_MAX; af++) {
		if (allowed[af])
			continue;
		if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT),
		        SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, af)) != 0 ||
		    seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT),
		        SCMP_SYS(socketpair), 1, SCMP_A0(SCMP_CMP_EQ, af)) != 0)
			return 1;
	}
	if (seccomp_load(ctx) != 0) {
		perror("restrict_af: seccomp_load");
		return 1;
	}
	execvp(argv[2], argv + 2);
	perror("restrict_af: exec");
	return 127;
}
