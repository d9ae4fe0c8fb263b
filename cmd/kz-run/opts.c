/*
 * The rules between kz-run's options.  With --room the projection is
 * kz-project's decision for that member in that room, so --file (a copy
 * of the caller's own files) cannot be mixed in, and the workspace key
 * H(actor, conversation) must be the member's in that room: a projection
 * admitted for one member never lands in another actor's workspace.
 */
#include <stdio.h>
#include <string.h>

#include "kz_err.h"
#include "run.h"
#include "banned.h"

static bool
given(const char *s)
{
	return s != NULL && *s != '\0';
}

/* a defaults to b; both given must agree. */
static int
same(const char **a, const char *b, const char *an, const char *bn, char *why,
    size_t wlen)
{
	if (*a == NULL)
		*a = b;
	else if (strcmp(*a, b) != 0) {
		kz_why(why, wlen, "--%s must equal --%s (or be left out)", an,
		    bn);
		return -1;
	}
	return 0;
}

static int
room_rules(struct run_opts *o, char *why, size_t wlen)
{
	if (given(o->room) != given(o->member) ||
	    (o->room != NULL && !given(o->room)) ||
	    (o->member != NULL && !given(o->member))) {
		kz_why(why, wlen, "--room and --member go together");
		return -1;
	}
	if (o->room == NULL) {
		if (o->nselect || o->nretrieved || o->contract ||
		    o->turn != NULL || o->call != NULL) {
			kz_why(why, wlen,
			    "--select, --retrieved, --contract, "
			    "--turn and --call need --room");
			return -1;
		}
		return 0;
	}
	if (o->nfiles > 0) {
		kz_why(why, wlen,
		    "--file and --room are exclusive: with "
		    "--room kz-project decides what is projected");
		return -1;
	}
	if (strlen(o->room) > RUN_ID_MAX || strlen(o->member) > RUN_ID_MAX ||
	    (o->turn != NULL &&
	        (!given(o->turn) || strlen(o->turn) > RUN_ID_MAX))) {
		kz_why(why, wlen, "an id is empty or longer than %d bytes",
		    RUN_ID_MAX);
		return -1;
	}
	if (same(&o->conv, o->room, "conversation", "room", why, wlen) != 0 ||
	    same(&o->actor, o->member, "actor", "member", why, wlen) != 0)
		return -1;
	return 0;
}

int
run_opts_check(struct run_opts *o, char *why, size_t wlen)
{
	if (room_rules(o, why, wlen) != 0)
		return -1;
	if (!given(o->actor) || !given(o->conv)) {
		kz_why(why, wlen,
		    "--actor and --conversation (or --member "
		    "and --room) are required");
		return -1;
	}
	if (strlen(o->actor) > 256 || strlen(o->conv) > 256) {
		kz_why(why, wlen,
		    "--actor or --conversation is longer than 256 bytes");
		return -1;
	}
	if (o->argc < 1 || o->argc > 256) {
		kz_why(why, wlen, "a command (1 to 256 words) follows --");
		return -1;
	}
	if (o->noutputs > 0 && o->room == NULL) {
		kz_why(why, wlen,
		    "--output needs --room: an output is linked to "
		    "the turn's room");
		return -1;
	}
	if (o->cap == NULL)
		o->cap = "code.run";
	return 0;
}
