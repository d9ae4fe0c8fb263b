/*
 * verify-receipt: is a receipt current for these files, this profile and
 * this contract?
 * 0 current pass, 1 stale, failed or forged, 2 bad input, 3 no key.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pv.h"
#include "banned.h"

int
pv_verify(const struct pv_conf *c, const char *receipt, const char *files,
    const char *profile, const char *contract)
{
	char why[256] = "", *text = NULL, prof[PV_DIGEST_HEX + 1];
	struct pv_tree t;
	struct stat st;
	int fd, rfd, r, rc;

	memset(&t, 0, sizeof(t));
	if (!pv_hex64(contract)) {
		fprintf(stderr, "kz-pi-validate: bad contract digest\n");
		return KZ_EXIT_USAGE;
	}
	if (pv_profile_digest(profile, prof, why, sizeof(why)) != 0) {
		fprintf(stderr, "kz-pi-validate: profile: %s\n", why);
		return KZ_EXIT_USAGE;
	}
	if ((fd = open(files, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    (rfd = open(receipt, O_RDONLY | O_CLOEXEC)) < 0) {
		fprintf(stderr,
		    "kz-pi-validate: cannot open the receipt or the files\n");
		if (fd >= 0)
			close(fd);
		return KZ_EXIT_USAGE;
	}
	if (fstat(rfd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    st.st_size > (1 << 20) ||
	    (text = malloc((size_t)st.st_size + 1)) == NULL ||
	    read(rfd, text, (size_t)st.st_size) != st.st_size) {
		rc = KZ_EXIT_USAGE;
		kz_why(why, sizeof(why), "unreadable receipt");
		goto out;
	}
	if ((r = pv_tree_scan(fd, false, &t, why, sizeof(why))) != 0) {
		rc = KZ_EXIT_REFUSED;
		goto out;
	}
	r = pv_receipt_verify(text, (size_t)st.st_size, c->keyfile, t.digest,
	    prof, contract, why, sizeof(why));
	rc = r == 0                      ? KZ_EXIT_OK :
	    r == KZ_EKEY || r == KZ_ESYS ? KZ_EXIT_UNAVAIL :
	    r == KZ_EJSON || r == KZ_EMISSING || r == KZ_ETYPE ?
	                                   KZ_EXIT_USAGE :
	                                   KZ_EXIT_REFUSED;
out:
	if (rc == 0)
		printf("current\n");
	else
		fprintf(stderr, "kz-pi-validate: %s\n", why);
	free(text);
	close(fd);
	close(rfd);
	pv_tree_release(&t);
	return rc;
}
