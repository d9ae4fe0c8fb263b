/*
 * Configuration: the file (--config or KZ_CONFIG), environment over file,
 * defaults last.  KZ_SOCKET and KZ_FIELD_KEY_FILE default under the run
 * dir by the one rule of kaizen.conf(5) (lib/conf.c); KZ_AUDIT_DIR is
 * RUN/audit when KZ_RUN_DIR is set (kz-supervise only has to give the run
 * directory), else /var/lib/kaizen/audit, which survives a reboot.
 * KZ_AUDIT_MAX_FILE_BYTES is at most what startup reads back whole (the
 * newest file, store.c): a larger file would stop the next start.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sodium.h>

#include "kz_conf.h"
#include "kz_frame.h"
#include "kz_srv.h"
#include "audit.h"
#include "banned.h"

#define DEFAULT_DIR "/var/lib/kaizen/audit"

static const char *const known[] = {"KZ_AUDIT_DIR", "KZ_AUDIT_MAX_FILE_BYTES",
    "KZ_FIELD_KEY_FILE", "KZ_SOCKET", "KZ_RUN_DIR", KZ_SRV_PEER_KEYS,
    "KZ_FRAME_MAX", "KZ_AUDIT_SOCKET", NULL};

static int
copy(char *dst, size_t len, const char *src, const char *key, char *why,
    size_t wlen)
{
	if (src == NULL || src[0] == '\0' || strlen(src) >= len) {
		kz_why(why, wlen, "%s is empty or too long", key);
		return KZ_ECONF;
	}
	memcpy(dst, src, strlen(src) + 1);
	return 0;
}

static int
dflt_under_run(const struct kz_conf *k, const char *key, const char *leaf,
    const char *dflt, char *dst, size_t len, char *why, size_t wlen)
{
	const char *run = kz_conf_str(k, "KZ_RUN_DIR", NULL);
	const char *v = kz_conf_str(k, key, NULL);
	char buf[4096];

	if (v == NULL && run != NULL && run[0] != '\0') {
		if ((size_t)snprintf(buf, sizeof(buf), "%s/%s", run, leaf) >=
		    sizeof(buf)) {
			kz_why(why, wlen, "KZ_RUN_DIR is too long");
			return KZ_ECONF;
		}
		v = buf;
	}
	return copy(dst, len, v ? v : dflt, key, why, wlen);
}

int
aud_cfg_load(const char *path, struct aud_cfg *c, char *why, size_t wlen)
{
	struct kz_conf *k = NULL;
	char run[PATH_MAX];
	int r;

	memset(c, 0, sizeof(*c));
	if ((r = kz_conf_load(path, known, &k, why, wlen)) != 0)
		return r;
	c->conf = k;
	if ((r = kz_run_dir(k, run, sizeof(run), why, wlen)) != 0 ||
	    (r = dflt_under_run(k, "KZ_AUDIT_DIR", "audit", DEFAULT_DIR, c->dir,
	         sizeof(c->dir), why, wlen)) != 0 ||
	    (r = kz_conf_sock(k, "KZ_SOCKET", run, "kz-audit", c->socket,
	         sizeof(c->socket), why, wlen)) != 0 ||
	    (r = kz_conf_copy(k, "KZ_FIELD_KEY_FILE", run, "field.key",
	         c->keyfile, sizeof(c->keyfile), why, wlen)) != 0 ||
	    (r = kz_conf_size(k, "KZ_AUDIT_MAX_FILE_BYTES",
	         AUD_MAX_FILE_DEFAULT, AUD_MAX_FILE_MAX, &c->max_file, why,
	         wlen)) != 0 ||
	    (r = kz_conf_size(k, "KZ_FRAME_MAX", KZ_FRAME_MAX_DEFAULT,
	         KZ_FRAME_MAX_LIMIT, &c->frame_max, why, wlen)) != 0 ||
	    (r = kz_srv_peers_load(k, &c->peers, NULL, why, wlen)) != 0)
		goto out;
	if (c->keyfile[0] == '\0') {
		kz_why(why, wlen, "KZ_FIELD_KEY_FILE is empty");
		r = KZ_ECONF;
	}
	if (c->max_file < AUD_MAX_FILE_MIN) {
		kz_why(why, wlen, "KZ_AUDIT_MAX_FILE_BYTES is below %llu",
		    (unsigned long long)AUD_MAX_FILE_MIN);
		r = KZ_ECONF;
	}
	if (c->frame_max < 64) {
		kz_why(why, wlen, "KZ_FRAME_MAX is too small");
		r = KZ_ECONF;
	}
out:
	if (r != 0)
		aud_cfg_release(c);
	return r;
}

void
aud_cfg_release(struct aud_cfg *c)
{
	kz_conf_free(c->conf);
	c->conf = NULL;
}

/*
 * The audit subkey, and the identifier subkey when asked for, each through
 * kz_key_load_subkey, so the load, derive and wipe of the field key are
 * written once, in lib/key.c.  The file is read once per subkey: a key
 * replaced between the two reads would give subkeys of two field keys,
 * the same hazard as two daemons that start on either side of the change.
 */
int
aud_keys_load(const char *keyfile, struct kz_key *audit, struct kz_key *idhash,
    char *why, size_t wlen)
{
	int r;

	if ((r = kz_key_load_subkey(keyfile, KZ_SUBKEY_AUDIT, audit, why,
	         wlen)) != 0)
		return r;
	if (idhash != NULL &&
	    (r = kz_key_load_subkey(keyfile, KZ_SUBKEY_IDHASH, idhash, why,
	         wlen)) != 0)
		kz_key_wipe(audit);
	return r;
}
