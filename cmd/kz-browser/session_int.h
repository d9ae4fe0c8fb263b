/*
 * What session.c (a session's life) and session_page.c (its page's ops)
 * share and no other kz-browser module needs.
 */
#ifndef KZB_SESSION_INT_H
#define KZB_SESSION_INT_H

#include <cJSON.h>

#include "kzb.h"

void kzb_out_set(struct kzb_out *o, const char *code, const char *why);
const char *kzb_str(const cJSON *o, const char *k);

#endif
