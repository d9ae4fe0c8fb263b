/*
 * The seccomp policy's tables (seccomp_table.c), shared with the code that
 * compiles and lists them (seccomp.c) alone.
 */
#ifndef SECCOMP_TABLE_H
#define SECCOMP_TABLE_H

struct sbx_group {
	const char *name;
	const char *const *calls; /* NULL-terminated */
};

struct sbx_arg_rule {
	const char *name, *kind, *rule;
};

/* Each ends with a NULL name. */
extern const struct sbx_group sbx_seccomp_allowed[];
extern const struct sbx_group sbx_seccomp_withheld[];
/* The calls whose arguments decide, as "kz-sandbox seccomp" lists them. */
extern const struct sbx_arg_rule sbx_seccomp_arg_rules[];

#endif
