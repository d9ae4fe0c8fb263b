/* kz-project configuration (conf.c) and the command line (cli.c). */
#ifndef KZP_CONF_H
#define KZP_CONF_H

#include <stddef.h>

#include "kz_conf.h"
#include "kz_exit.h"
#include "kzp.h"

struct kzp_cfg {
	struct kz_conf *conf;
	char *blobdir;
	char *keyfile;
	char *sock;
	char store_sock[108];
	char audit_sock[108]; /* "" with KZ_AUDIT = off */
	size_t frame_max;
};

extern const char *const kzp_conf_keys[];
KZ_WUR int kzp_conf_apply(struct kzp_cfg *c, struct kzp *p, char *why,
    size_t wlen);
void kzp_cfg_release(struct kzp_cfg *c);

/* Builds a request object from "--name value" arguments of one op. */
KZ_WUR int kzp_cli_request(const char *op, int argc, char **argv, cJSON **out,
    char *why, size_t wlen);
/* Runs the daemon until SIGTERM/SIGINT. */
enum kz_exit kzp_serve(struct kzp *p, struct kzp_cfg *c);

#endif
