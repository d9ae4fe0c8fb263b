/*
 * Artifact script classification (see classify.c): whether a script is
 * host administration, which dispatch refuses before any worker sees it.
 */
#ifndef KZ_CLASSIFY_H
#define KZ_CLASSIFY_H

#include <stddef.h>

#include "kz_err.h"

/* Largest file kz_classify_file reads; a larger one cannot be classified. */
#define KZ_CLASSIFY_MAX (64L * 1024 * 1024)

enum kz_class { KZ_CLASS_OK = 0, KZ_CLASS_HOST_ADMIN = 1 };

/* Classifies len bytes of text; why gets the reason for HOST_ADMIN. */
enum kz_class kz_classify(const char *text, size_t len, char *why, size_t wlen);
/* Classifies a whole regular file: KZ_CLASS_OK, KZ_CLASS_HOST_ADMIN, or a
 * negative KZ_E* (cannot open, not a regular file, too large, changed
 * while read) with why saying so. */
KZ_WUR int kz_classify_file(const char *path, char *why, size_t wlen);

#endif
