#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>

#include "kz_io.h"
#include "kz_key.h"
#include "banned.h"

static int
sodium_ready(void)
{
	return sodium_init() < 0 ? KZ_EINTERNAL : 0;
}

int
kz_key_load(const char *path, struct kz_key *out, char *why, size_t wlen)
{
	unsigned char buf[KZ_KEY_BYTES + 1];
	struct stat st;
	ssize_t n;
	int fd, r = KZ_EKEY;

	if ((r = sodium_ready()) != 0)
		return r;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0) {
		kz_why(why, wlen, "cannot open field key: %s", strerror(errno));
		return errno == ENOENT ? KZ_ENOENT : KZ_EKEY;
	}
	r = KZ_EKEY;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		kz_why(why, wlen, "field key is not a regular file");
		goto out;
	}
	/* 0400 is what systemd's LoadCredential= gives a unit. */
	if ((st.st_mode & 07777) != 0600 && (st.st_mode & 07777) != 0400) {
		kz_why(why, wlen,
		    "field key mode is %04o, must be 0600 or 0400",
		    (unsigned)(st.st_mode & 07777));
		goto out;
	}
	if (st.st_uid != geteuid() && geteuid() != 0) {
		kz_why(why, wlen, "field key is owned by another user");
		goto out;
	}
	n = read(fd, buf, sizeof(buf));
	if (n != KZ_KEY_BYTES) {
		kz_why(why, wlen, "field key must be exactly %d bytes",
		    KZ_KEY_BYTES);
		goto out;
	}
	memcpy(out->k, buf, KZ_KEY_BYTES);
	r = 0;
out:
	sodium_memzero(buf, sizeof(buf));
	close(fd);
	return r;
}

int
kz_key_generate(const char *path, char *why, size_t wlen)
{
	struct kz_key k;
	int fd, r;

	if ((r = sodium_ready()) != 0)
		return r;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
	    0600);
	if (fd < 0) {
		kz_why(why, wlen, "cannot create field key: %s",
		    strerror(errno));
		return errno == EEXIST ? KZ_EEXIST : KZ_ESYS;
	}
	randombytes_buf(k.k, sizeof(k.k));
	r = kz_write_full(fd, k.k, sizeof(k.k), -1);
	kz_key_wipe(&k);
	if (r == 0 && (fchmod(fd, 0600) < 0 || fsync(fd) < 0))
		r = KZ_ESYS;
	close(fd);
	if (r != 0) {
		unlink(path);
		kz_why(why, wlen, "cannot write field key");
	}
	return r;
}

int
kz_key_derive(const struct kz_key *master, enum kz_subkey id,
    struct kz_key *out)
{
	if (sodium_ready() != 0)
		return KZ_EINTERNAL;
	if (crypto_kdf_derive_from_key(out->k, sizeof(out->k), (uint64_t)id,
	        KZ_KDF_CTX, master->k) != 0)
		return KZ_EINTERNAL;
	return 0;
}

int
kz_key_load_subkey(const char *path, enum kz_subkey id, struct kz_key *out,
    char *why, size_t wlen)
{
	struct kz_key master;
	int r;

	if ((r = kz_key_load(path, &master, why, wlen)) != 0)
		return r;
	if ((r = kz_key_derive(&master, id, out)) != 0) {
		kz_key_wipe(out);
		kz_why(why, wlen, "deriving a subkey failed");
	}
	kz_key_wipe(&master);
	return r;
}

void
kz_key_wipe(struct kz_key *k)
{
	if (k != NULL)
		sodium_memzero(k->k, sizeof(k->k));
}

static int
idhash_parts(const struct kz_key *idkey, const char *kind,
    const char *const *parts, size_t nparts, char out[KZ_IDHASH_HEX + 1])
{
	crypto_generichash_state st;
	unsigned char h[KZ_IDHASH_BYTES];
	unsigned char len[8];

	if (sodium_ready() != 0)
		return KZ_EINTERNAL;
	if (crypto_generichash_init(&st, idkey->k, sizeof(idkey->k),
	        sizeof(h)) != 0)
		return KZ_EINTERNAL;
	/* Length-prefixed parts: ("ab","c") and ("a","bc") never collide. */
	for (size_t i = 0; i <= nparts; i++) {
		const char *p = i == 0 ? kind : parts[i - 1];
		uint64_t n = strlen(p);

		for (int b = 0; b < 8; b++)
			len[b] = (unsigned char)(n >> (8 * b));
		crypto_generichash_update(&st, len, sizeof(len));
		crypto_generichash_update(&st, (const unsigned char *)p, n);
	}
	crypto_generichash_final(&st, h, sizeof(h));
	kz_hex(h, sizeof(h), out);
	sodium_memzero(&st, sizeof(st));
	return 0;
}

int
kz_key_idhash(const struct kz_key *idkey, const char *kind, const char *id,
    char out[KZ_IDHASH_HEX + 1])
{
	const char *parts[1] = {id};

	return idhash_parts(idkey, kind, parts, 1, out);
}

int
kz_key_idhash2(const struct kz_key *idkey, const char *kind, const char *a,
    const char *b, char out[KZ_IDHASH_HEX + 1])
{
	const char *parts[2] = {a, b};

	return idhash_parts(idkey, kind, parts, 2, out);
}

bool
kz_ct_equal(const void *a, const void *b, size_t n)
{
	return sodium_memcmp(a, b, n) == 0;
}

void
kz_hex(const unsigned char *in, size_t n, char *out)
{
	sodium_bin2hex(out, n * 2 + 1, in, n);
}

int
kz_unhex(const char *in, unsigned char *out, size_t n)
{
	size_t got = 0;
	const char *end = NULL;

	if (strlen(in) != n * 2)
		return KZ_EINVAL;
	if (sodium_hex2bin(out, n, in, n * 2, NULL, &got, &end) != 0 ||
	    got != n || *end != '\0')
		return KZ_EINVAL;
	return 0;
}
