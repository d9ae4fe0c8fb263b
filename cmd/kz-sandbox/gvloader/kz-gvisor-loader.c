/*
 * kz-gvisor-loader: the first process of every gVisor sandbox kz-sandbox
 * boots (gvisor.c, gvisor_exec.c), bound read-only into the view at
 * SBX_GV_LOADER.  It is a binary of its own, static and built from
 * nothing but libc and the few pieces of kz-sandbox it runs, because
 * inside gVisor's ptrace platform every system call of a start is a trap:
 * kz-sandbox itself maps six shared libraries and the preload object,
 * which made each boot about 12 ms longer.
 */
#include <stdio.h>
#include <string.h>

#include "kz_exit.h"
#include "sbx_gvisor.h"
#include "banned.h"

int
main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "gvisor-serve") == 0)
		return sbx_gv_serve(argv[2], argv[3]);
	fputs("usage: kz-gvisor-loader gvisor-serve UID GID\n"
	      "(kz-sandbox starts it inside a gVisor sandbox; see "
	      "kz-sandbox(8))\n",
	    stderr);
	return KZ_EXIT_USAGE;
}
