/*
 * Admission: whether this process may grant a lease now.  It is open only
 * while the store has answered its epoch check and the controller's
 * inventory was readable at the last look, and not while draining.  The
 * lease op is marked KZ_OP_ADMIT in the op table, so lib/srv.c asks
 * admission_admit before the handler runs.
 */
#include <stdio.h>

#include "kz_log.h"
#include "kz_store.h"
#include "daemon.h"
#include "banned.h"

void
admission_update(struct lease_daemon *d)
{
	const char *why = NULL;

	if (!kz_astore_connected(d->st) || !d->store_ok)
		why = "store unavailable";
	else if (!d->inv_ok)
		why = "controller inventory unavailable";
	else if (d->draining)
		why = "draining";
	if ((why == NULL) != d->open)
		kz_log(why ? KZ_LOG_WARN : KZ_LOG_INFO,
		    why ? "admission.close" : "admission.open", 0,
		    why ? why : "admission open", "epoch", d->epoch, NULL);
	d->open = why == NULL;
	snprintf(d->closed_why, sizeof(d->closed_why), "%s", why ? why : "");
}

bool
admission_admit(void *arg, char *why, size_t wlen)
{
	struct lease_daemon *d = arg;

	if (d->open)
		return true;
	/* A lease refused at the door counts as refused, as one the store
	 * refused does (status's leases_refused). */
	d->n.refused++;
	if (d->closed_why[0] != '\0')
		kz_why(why, wlen, "%s", d->closed_why);
	return false;
}
