/*
 * Exit statuses, the same for every kz binary (each man page's EXIT STATUS
 * lists them).  A binary returns one of these from main and nothing else.
 */
#ifndef KZ_EXIT_H
#define KZ_EXIT_H

enum kz_exit {
	KZ_EXIT_OK = 0, /* done; or allowed */
	KZ_EXIT_REFUSED = 1, /* refused by policy */
	KZ_EXIT_USAGE = 2, /* bad usage, bad input or bad configuration */
	KZ_EXIT_UNAVAIL = 3, /* a dependency is unavailable: failed closed */
	KZ_EXIT_INTERNAL = 4, /* an internal error */
};

/*
 * The status for a wire error code (kz_wire.h): the code's own column;
 * NULL is KZ_EXIT_INTERNAL (the reply carried no code) and a code outside
 * the closed set is KZ_EXIT_REFUSED.
 */
enum kz_exit kz_exit_for_wire(const char *code);

/* The status for a negative kz_err from a library call made on the
 * caller's own behalf: KZ_EUNAVAIL, KZ_ETIMEDOUT, KZ_EEOF and KZ_EPEER are
 * KZ_EXIT_UNAVAIL, KZ_EDENIED and KZ_ECRYPTO are KZ_EXIT_REFUSED, KZ_ECONF,
 * KZ_EKEY and the parse errors are KZ_EXIT_USAGE, the rest KZ_EXIT_INTERNAL; 0
 * is OK. */
enum kz_exit kz_exit_for_err(int err);

#endif
