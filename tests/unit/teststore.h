/*
 * A real store for the unit suites that need one: valkey-server if
 * installed, else redis-server, on a Unix socket in a private temp dir, no
 * TCP port, nothing saved.  ts_start and ts_stop run in the suite's parent
 * process (an unchecked fixture); a test may stop, freeze or restart the
 * server, and ts_stop finds it again by its pid file.  ts_stop kills the
 * server and removes the directory.
 */
#ifndef TESTSTORE_H
#define TESTSTORE_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char ts_dir[64], ts_sock[128], ts_pidf[128];

static inline void
ts_nap(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static inline const char *
ts_server(void)
{
	static const char *const cand[] = {"/usr/bin/valkey-server",
	    "/usr/local/bin/valkey-server", "/usr/bin/redis-server",
	    "/usr/local/bin/redis-server", NULL};
	int i;

	for (i = 0; cand[i] != NULL; i++)
		if (access(cand[i], X_OK) == 0)
			return cand[i];
	return NULL;
}

static inline pid_t
ts_pid(void)
{
	char b[32] = "";
	FILE *f = fopen(ts_pidf, "r");
	long p = 0;

	if (f == NULL)
		return 0;
	if (fgets(b, sizeof(b), f) != NULL)
		p = strtol(b, NULL, 10);
	fclose(f);
	return (pid_t)p;
}

/* Starts the server (the directory must exist) and waits for its socket
 * and pid file; 0 or -1. */
static inline int
ts_launch(void)
{
	const char *srv = ts_server();
	int i, fd;
	pid_t pid;

	if (srv == NULL)
		return -1;
	unlink(ts_pidf);
	if ((pid = fork()) < 0)
		return -1;
	if (pid == 0) {
		if ((fd = open("/dev/null", O_RDWR)) >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(srv, srv, "--port", "0", "--unixsocket", ts_sock,
		    "--unixsocketperm", "600", "--dir", ts_dir, "--save", "",
		    "--appendonly", "no", "--daemonize", "no", "--pidfile",
		    ts_pidf, "--loglevel", "warning", (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 200; i++) {
		struct stat sb;

		if (stat(ts_sock, &sb) == 0 && ts_pid() == pid)
			return 0;
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return -1;
		ts_nap(25);
	}
	return -1;
}

/* Stops the server, wherever it was started from, and waits until it
 * is gone. */
static inline void
ts_kill(void)
{
	pid_t p = ts_pid();
	int i;

	if (p <= 0)
		return;
	kill(p, SIGCONT);
	kill(p, SIGKILL);
	for (i = 0; i < 200 && kill(p, 0) == 0; i++) {
		(void)waitpid(p, NULL, WNOHANG);
		ts_nap(10);
	}
	unlink(ts_sock);
	unlink(ts_pidf);
}

static inline void
ts_start(void)
{
	snprintf(ts_dir, sizeof(ts_dir), "/tmp/kz-unit-store.XXXXXX");
	if (mkdtemp(ts_dir) == NULL) {
		perror("mkdtemp");
		exit(1);
	}
	snprintf(ts_sock, sizeof(ts_sock), "%s/store.sock", ts_dir);
	snprintf(ts_pidf, sizeof(ts_pidf), "%s/store.pid", ts_dir);
	if (ts_launch() != 0) {
		fprintf(stderr,
		    "no redis-server or valkey-server could be started\n");
		exit(1);
	}
}

/* A restart loses the data (nothing is saved) and the run id. */
static inline int
ts_restart(void)
{
	ts_kill();
	return ts_launch();
}

static inline void
ts_stop(void)
{
	char cmd[160];

	ts_kill();
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", ts_dir);
	if (ts_dir[0] != '\0' && system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", ts_dir);
}

static inline void
ts_freeze(bool on)
{
	pid_t p = ts_pid();

	if (p > 0)
		kill(p, on ? SIGSTOP : SIGCONT);
}

#endif
