/* lib/snap.c: the snapshot layout, use at lease time, expiry, and commits
 * under the per-actor and deployment bounds: least recently used evicted
 * first, an archive over a bound alone never saved, a failed commit never
 * leaving the older snapshot behind, concurrent commits never overshooting
 * (the directory lock), and hostile names (symlinks, other files) left
 * alone. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kz_snap.h"
#include "kz_check.h"
#include "banned.h"

#define DAY_MS (86400LL * 1000)

static char dir[64];

static int
rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)f;
	return flag == FTW_DP ? rmdir(p) : unlink(p);
}

static void
setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/kzsnap.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void
teardown(void)
{
	(void)nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* DIR/REL, n bytes, last used age_ms ago. */
static void
put(const char *rel, size_t n, int64_t age_ms)
{
	char p[256], *b = calloc(1, n + 1);
	struct timespec ts[2];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	ck_assert_int_ge(fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600), 0);
	ck_assert_int_eq(write(fd, b, n), (ssize_t)n);
	close(fd);
	free(b);
	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= age_ms / 1000;
	ts[1] = ts[0];
	ck_assert_int_eq(utimensat(AT_FDCWD, p, ts, 0), 0);
}

static void
mkd(const char *rel)
{
	char p[256];

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	ck_assert_int_eq(mkdir(p, 0770), 0);
}

static bool
has(const char *rel)
{
	char p[256];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	return lstat(p, &st) == 0;
}

static const char *
at(const char *rel)
{
	static char p[4][256];
	static int i;

	i = (i + 1) % 4;
	snprintf(p[i], sizeof(p[i]), "%s/%s", dir, rel);
	return p[i];
}

static const struct kz_snap_bounds B = {.actor_max = 3000,
    .total_max = 5000,
    .ttl_ms = 30 * DAY_MS};

START_TEST(test_path)
{
	char p[256];

	ck_assert_int_eq(kz_snap_path("/s", "a1", "k1", p, sizeof(p)), 0);
	ck_assert_str_eq(p, "/s/a1/k1.tar");
	ck_assert_int_eq(kz_snap_path("/s", "a/b", "k", p, sizeof(p)),
	    KZ_EINVAL);
	ck_assert_int_eq(kz_snap_path("/s", "..", "k", p, sizeof(p)),
	    KZ_EINVAL);
	ck_assert_int_eq(kz_snap_path("/s", "a", "", p, sizeof(p)), KZ_EINVAL);
	ck_assert_int_eq(kz_snap_path("/s", "a", "k", p, 8), KZ_ETOOBIG);
}
END_TEST

START_TEST(test_offer)
{
	char p[256];
	struct stat st;

	umask(077);
	ck_assert_int_eq(kz_snap_offer(dir, "a1", "k1", B.ttl_ms, p, sizeof(p)),
	    0);
	ck_assert_str_eq(p, at("a1/k1.tar"));
	ck_assert_int_eq(stat(at("a1"), &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, KZ_SNAP_DIR_MODE);
	/* Offered for restore: marked used now. */
	put("a1/k1.tar", 10, 10 * DAY_MS);
	ck_assert_int_eq(kz_snap_offer(dir, "a1", "k1", B.ttl_ms, p, sizeof(p)),
	    0);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_ge(st.st_mtime, time(NULL) - 5);
	ck_assert_int_eq(kz_snap_fresh(p, B.ttl_ms), 0);
	/* Expired: removed, never offered. */
	put("a1/k1.tar", 10, 31 * DAY_MS);
	ck_assert_int_eq(kz_snap_offer(dir, "a1", "k1", B.ttl_ms, p, sizeof(p)),
	    0);
	ck_assert(!has("a1/k1.tar"));
	ck_assert_int_eq(kz_snap_fresh(p, B.ttl_ms), KZ_ENOENT);
	/* A symlink in its place is removed, never followed. */
	put("target", 10, 0);
	ck_assert_int_eq(symlink(at("target"), p), 0);
	ck_assert_int_eq(kz_snap_offer(dir, "a1", "k1", B.ttl_ms, p, sizeof(p)),
	    0);
	ck_assert(!has("a1/k1.tar"));
	ck_assert(has("target"));
}
END_TEST

START_TEST(test_fresh)
{
	mkd("a1");
	put("a1/k1.tar", 10, 2000);
	ck_assert_int_eq(kz_snap_fresh(at("a1/k1.tar"), 60000), 0);
	ck_assert_int_eq(kz_snap_fresh(at("a1/k1.tar"), 1000), KZ_ESTATE);
	ck_assert(!has("a1/k1.tar"));
}
END_TEST

START_TEST(test_commit_replaces)
{
	char why[160] = "";
	int ev = -1;

	mkd("a1");
	put("a1/k1.tar", 2500, 1000);
	put("a1/k1.tar.r1.new", 2800, 0);
	/* The snapshot it replaces does not count against the bound. */
	ck_assert_int_eq(kz_snap_commit(at("a1/k1.tar"), at("a1/k1.tar.r1.new"),
	                     &B, NULL, &ev, why, sizeof(why)),
	    0);
	ck_assert_int_eq(ev, 0);
	ck_assert(!has("a1/k1.tar.r1.new"));
	ck_assert(has("a1/k1.tar"));
}
END_TEST

START_TEST(test_commit_over_bound_alone)
{
	char why[160] = "";
	int ev;

	mkd("a1");
	put("a1/k1.tar", 100, 1000);
	put("a1/k2.tar", 100, 1000);
	put("a1/k1.tar.r1.new", 3001, 0);
	ck_assert_int_eq(kz_snap_commit(at("a1/k1.tar"), at("a1/k1.tar.r1.new"),
	                     &B, NULL, &ev, why, sizeof(why)),
	    KZ_ETOOBIG);
	ck_assert_str_eq(why,
	    "the workspace archive (2.9K) is larger than "
	    "the per-actor snapshot bound (2.9K)");
	/* The older snapshot does not come back; nothing else goes. */
	ck_assert(!has("a1/k1.tar"));
	ck_assert(!has("a1/k1.tar.r1.new"));
	ck_assert(has("a1/k2.tar"));
}
END_TEST

START_TEST(test_commit_failures_drop_older)
{
	struct kz_snap_bounds b = B;
	char why[160] = "";
	int ev;

	mkd("a1");
	put("a1/k1.tar", 100, 1000);
	/* The worker wrote nothing. */
	ck_assert_int_ne(kz_snap_commit(at("a1/k1.tar"), at("a1/k1.tar.r1.new"),
	                     &b, NULL, &ev, why, sizeof(why)),
	    0);
	ck_assert(!has("a1/k1.tar"));
	/* Over the deployment's bound alone. */
	put("a1/k1.tar", 100, 1000);
	put("a1/k1.tar.r2.new", 200, 0);
	b.total_max = 150;
	ck_assert_int_eq(kz_snap_commit(at("a1/k1.tar"), at("a1/k1.tar.r2.new"),
	                     &b, NULL, &ev, why, sizeof(why)),
	    KZ_ETOOBIG);
	ck_assert(strstr(why, "deployment's snapshot bound (150 bytes)"));
	ck_assert(!has("a1/k1.tar") && !has("a1/k1.tar.r2.new"));
}
END_TEST

/* Another run's commit of rel: a new file renamed over it. */
static void
recommit(const char *rel, size_t n)
{
	char tmp[128], a[256], b[256];

	snprintf(tmp, sizeof(tmp), "%s.other.new", rel);
	put(tmp, n, 0);
	snprintf(a, sizeof(a), "%s/%s", dir, tmp);
	snprintf(b, sizeof(b), "%s/%s", dir, rel);
	ck_assert_int_eq(rename(a, b), 0);
}

static uint64_t
size_of(const char *rel)
{
	char p[256];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	return stat(p, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* Two runs of one workspace restored the same snapshot: the first to
 * commit wins, the other is refused and removes nothing of it; a save
 * that fails removes the older snapshot only while it is the one the run
 * started from. */
START_TEST(test_commit_base)
{
	struct kz_snap_id base, none;
	char why[160] = "";
	int ev;

	mkd("a1");
	put("a1/k.tar", 100, 1000);
	ck_assert_int_eq(kz_snap_ident(at("a1/k.tar"), &base), 0);
	ck_assert(base.exists);
	ck_assert_int_eq(kz_snap_ident(at("a1/none.tar"), &none), 0);
	ck_assert(!none.exists);
	/* Run B commits first (same size: the file, not its size, tells). */
	recommit("a1/k.tar", 100);
	put("a1/k.tar.a.new", 300, 0);
	ck_assert_int_eq(kz_snap_commit(at("a1/k.tar"), at("a1/k.tar.a.new"),
	                     &B, &base, &ev, why, sizeof(why)),
	    KZ_EEXIST);
	ck_assert(strstr(why, "another run of this conversation saved"));
	ck_assert(has("a1/k.tar") && size_of("a1/k.tar") == 100);
	ck_assert(!has("a1/k.tar.a.new"));
	/* A's failed save does not remove B's snapshot either. */
	put("a1/k.tar.a.new", 300, 0);
	kz_snap_drop(at("a1/k.tar"), at("a1/k.tar.a.new"), &base);
	ck_assert(has("a1/k.tar") && !has("a1/k.tar.a.new"));
	/* A run that started with no snapshot, when one appeared since. */
	put("a1/k.tar.c.new", 50, 0);
	ck_assert_int_eq(kz_snap_commit(at("a1/k.tar"), at("a1/k.tar.c.new"),
	                     &B, &none, &ev, why, sizeof(why)),
	    KZ_EEXIST);
	ck_assert(size_of("a1/k.tar") == 100);
	/* Its own base: committed, replacing it. */
	ck_assert_int_eq(kz_snap_ident(at("a1/k.tar"), &base), 0);
	put("a1/k.tar.d.new", 70, 0);
	ck_assert_int_eq(kz_snap_commit(at("a1/k.tar"), at("a1/k.tar.d.new"),
	                     &B, &base, &ev, why, sizeof(why)),
	    0);
	ck_assert(size_of("a1/k.tar") == 70);
	/* Its base evicted or expired meanwhile: nothing newer is there, so
	 * the save is kept. */
	ck_assert_int_eq(kz_snap_ident(at("a1/k.tar"), &base), 0);
	ck_assert_int_eq(unlink(at("a1/k.tar")), 0);
	put("a1/k.tar.e.new", 80, 0);
	ck_assert_int_eq(kz_snap_commit(at("a1/k.tar"), at("a1/k.tar.e.new"),
	                     &B, &base, &ev, why, sizeof(why)),
	    0);
	ck_assert(size_of("a1/k.tar") == 80);
	/* A failed save whose base is still in place removes it. */
	ck_assert_int_eq(kz_snap_ident(at("a1/k.tar"), &base), 0);
	kz_snap_drop(at("a1/k.tar"), NULL, &base);
	ck_assert(!has("a1/k.tar"));
}
END_TEST

START_TEST(test_commit_evicts_actor_lru)
{
	char why[160] = "";
	int ev;

	mkd("a1");
	mkd("a2");
	put("a1/old.tar", 1000, 5000);
	put("a1/mid.tar", 1000, 3000);
	put("a1/new.tar", 900, 1000);
	put("a2/older.tar", 1000, 9000);
	put("a1/k.tar.r.new", 1000, 0);
	/* a1 holds 2900 of 3000: the oldest of a1's goes, not a2's. */
	ck_assert_int_eq(kz_snap_commit(at("a1/k.tar"), at("a1/k.tar.r.new"),
	                     &B, NULL, &ev, why, sizeof(why)),
	    0);
	ck_assert_int_eq(ev, 1);
	ck_assert(!has("a1/old.tar"));
	ck_assert(has("a1/mid.tar") && has("a1/new.tar") && has("a1/k.tar"));
	ck_assert(has("a2/older.tar"));
}
END_TEST

START_TEST(test_commit_evicts_anyones_lru)
{
	char why[160] = "";
	int ev;

	mkd("a1");
	mkd("a2");
	mkd("a3");
	put("a2/x.tar", 2000, 9000);
	put("a3/y.tar", 2000, 5000);
	put("a1/z.tar", 500, 8000);
	put("a1/k.tar.r.new", 1000, 0);
	/* 4500 of 5000 held: anyone's least recently used goes first. */
	ck_assert_int_eq(kz_snap_commit(at("a1/k.tar"), at("a1/k.tar.r.new"),
	                     &B, NULL, &ev, why, sizeof(why)),
	    0);
	ck_assert_int_eq(ev, 1);
	ck_assert(!has("a2/x.tar"));
	ck_assert(has("a3/y.tar") && has("a1/z.tar") && has("a1/k.tar"));
}
END_TEST

START_TEST(test_commit_concurrent)
{
	struct kz_snap_bounds b = {.actor_max = 1 << 20,
	    .total_max = 4000,
	    .ttl_ms = DAY_MS};
	char rel[64], tmp[80], why[160];
	uint64_t total = 0;
	struct stat st;
	int i, k, st_, ev;
	pid_t pids[8];

	mkd("a1");
	/* Eight savers at once, five saves each: the lock keeps every
	 * moment's total under the bound, so the end state is too. */
	for (i = 0; i < 8; i++) {
		if ((pids[i] = fork()) == 0) {
			for (k = 0; k < 5; k++) {
				snprintf(rel, sizeof(rel), "a1/k%d-%d.tar", i,
				    k);
				snprintf(tmp, sizeof(tmp), "%s.n.new", rel);
				put(tmp, 900, 0);
				if (kz_snap_commit(at(rel), at(tmp), &b, NULL,
				        &ev, why, sizeof(why)) != 0)
					_exit(1);
			}
			_exit(0);
		}
		ck_assert_int_gt(pids[i], 0);
	}
	for (i = 0; i < 8; i++) {
		ck_assert_int_eq(waitpid(pids[i], &st_, 0), pids[i]);
		ck_assert(WIFEXITED(st_) && WEXITSTATUS(st_) == 0);
	}
	for (i = 0; i < 8; i++)
		for (k = 0; k < 5; k++) {
			snprintf(rel, sizeof(rel), "a1/k%d-%d.tar", i, k);
			if (stat(at(rel), &st) == 0)
				total += (uint64_t)st.st_size;
		}
	ck_assert_uint_le(total, 4000);
	ck_assert_uint_eq(total, 3600);
}
END_TEST

/* A commit waits for the directory lock a sweep or another commit holds,
 * so two savers never account for the same room. */
START_TEST(test_commit_waits_for_lock)
{
	char why[160];
	int fd, st, ev;
	pid_t pid;

	mkd("a1");
	put("a1/k.tar.r.new", 10, 0);
	ck_assert_int_ge(fd = open(dir, O_RDONLY | O_DIRECTORY), 0);
	ck_assert_int_eq(flock(fd, LOCK_EX), 0);
	if ((pid = fork()) == 0) {
		/* Not the parent's lock: its description would keep it. */
		close(fd);
		_exit(kz_snap_commit(at("a1/k.tar"), at("a1/k.tar.r.new"), &B,
		          NULL, &ev, why, sizeof(why)) == 0 ?
		        0 :
		        1);
	}
	ck_assert_int_gt(pid, 0);
	usleep(300000);
	ck_assert_int_eq(waitpid(pid, &st, WNOHANG), 0);
	ck_assert(!has("a1/k.tar"));
	close(fd);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	ck_assert(has("a1/k.tar"));
}
END_TEST

START_TEST(test_sweep)
{
	int n = -1;

	mkd("a1");
	mkd("a2");
	put("a1/fresh.tar", 10, 1000);
	put("a1/stale.tar", 10, 31 * DAY_MS);
	put("a2/stale.tar", 10, 40 * DAY_MS);
	put("a1/x.tar.r.new", 10, 2 * 3600 * 1000);
	put("a1/y.tar.r.new", 10, 1000);
	put("flat.tar", 10, 31 * DAY_MS);
	put("a1/notes", 10, 99 * DAY_MS);
	ck_assert_int_eq(kz_snap_sweep(dir, 30 * DAY_MS, &n), 0);
	ck_assert_int_eq(n, 4);
	ck_assert(has("a1/fresh.tar") && has("a1/y.tar.r.new"));
	ck_assert(!has("a1/stale.tar") && !has("a2/stale.tar"));
	ck_assert(!has("a1/x.tar.r.new") && !has("flat.tar"));
	/* Not a name of this layout: left alone. */
	ck_assert(has("a1/notes"));
	ck_assert_int_eq(kz_snap_sweep("/nonexistent/kzsnap", DAY_MS, &n), 0);
}
END_TEST

/* Sets DIR/REL's times age_ms ago (a directory's entries change them). */
static void
age(const char *rel, int64_t age_ms)
{
	struct timespec ts[2];

	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= age_ms / 1000;
	ts[1] = ts[0];
	ck_assert_int_eq(utimensat(AT_FDCWD, at(rel), ts, AT_SYMLINK_NOFOLLOW),
	    0);
}

/*
 * A run's output directory that a kz-run which died left (the declared
 * outputs it took out of a workspace) is removed once it is an hour old,
 * all of it, a symlink in it removed and never followed; a younger one
 * (a run still linking) and a directory of no name of this layout stay.
 */
START_TEST(test_sweep_outdirs)
{
	int n = -1;

	mkd("a1");
	mkd("keep");
	put("keep/canary", 3, 1000);
	mkd("a1/k.tar.r1.out.d");
	mkd("a1/k.tar.r1.out.d/sub");
	put("a1/k.tar.r1.out.d/sub/out.txt", 5, 1000);
	ck_assert_int_eq(symlink(at("keep"), at("a1/k.tar.r1.out.d/l")), 0);
	age("a1/k.tar.r1.out.d", 2 * 3600 * 1000);
	mkd("a1/k.tar.r2.out.d");
	put("a1/k.tar.r2.out.d/out.txt", 5, 1000);
	mkd("a1/other.d");
	age("a1/other.d", 2 * 3600 * 1000);
	ck_assert_int_eq(kz_snap_sweep(dir, 30 * DAY_MS, &n), 0);
	ck_assert_int_eq(n, 1);
	ck_assert(!has("a1/k.tar.r1.out.d"));
	ck_assert(has("keep/canary"));
	ck_assert(has("a1/k.tar.r2.out.d/out.txt") && has("a1/other.d"));
}
END_TEST

/* The ledger (DIR/.usage) as a number; -1 when there is none. */
static long long
ledger(void)
{
	char p[256];
	long long v = -1;
	FILE *f;

	snprintf(p, sizeof(p), "%s/.usage", dir);
	if ((f = fopen(p, "r")) == NULL)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

static void
set_ledger(const char *text)
{
	char p[256];
	FILE *f;

	snprintf(p, sizeof(p), "%s/.usage", dir);
	ck_assert_ptr_nonnull(f = fopen(p, "w"));
	fputs(text, f);
	fclose(f);
}

START_TEST(test_ledger_tracks_commits)
{
	char why[160] = "";
	int ev;

	mkd("a1");
	mkd("a2");
	put("a2/x.tar", 700, 9000);
	put("a1/k.tar.r.new", 1000, 0);
	/* No ledger yet: it is built from a scan of every directory. */
	ck_assert_int_eq(kz_snap_commit(at("a1/k.tar"), at("a1/k.tar.r.new"),
	                     &B, NULL, &ev, why, sizeof(why)),
	    0);
	ck_assert_int_eq(ledger(), 1700);
	/* A replaced snapshot leaves the ledger, its successor enters. */
	put("a1/k.tar.s.new", 400, 0);
	ck_assert_int_eq(kz_snap_commit(at("a1/k.tar"), at("a1/k.tar.s.new"),
	                     &B, NULL, &ev, why, sizeof(why)),
	    0);
	ck_assert_int_eq(ledger(), 1100);
	/* An eviction within the actor is subtracted. */
	put("a1/k2.tar.r.new", 2900, 0);
	ck_assert_int_eq(kz_snap_commit(at("a1/k2.tar"), at("a1/k2.tar.r.new"),
	                     &B, NULL, &ev, why, sizeof(why)),
	    0);
	ck_assert_int_eq(ev, 1);
	ck_assert(!has("a1/k.tar"));
	ck_assert_int_eq(ledger(), 3600);
}
END_TEST

START_TEST(test_ledger_high_is_corrected_before_evicting)
{
	char why[160] = "";
	int ev;

	mkd("a1");
	mkd("a2");
	put("a2/x.tar", 1000, 9000);
	/* The ledger says the tree is nearly full (files removed behind its
	 * back): the commit scans the truth and evicts no one. */
	set_ledger("4900\n");
	put("a1/k.tar.r.new", 1000, 0);
	ck_assert_int_eq(kz_snap_commit(at("a1/k.tar"), at("a1/k.tar.r.new"),
	                     &B, NULL, &ev, why, sizeof(why)),
	    0);
	ck_assert_int_eq(ev, 0);
	ck_assert(has("a2/x.tar") && has("a1/k.tar"));
	ck_assert_int_eq(ledger(), 2000);
}
END_TEST

START_TEST(test_ledger_garbage_is_rebuilt)
{
	char why[160] = "";
	int ev;

	mkd("a1");
	mkd("a2");
	put("a2/x.tar", 2500, 9000);
	put("a2/y.tar", 2000, 5000);
	/* Unreadable or low, it is not believed where it matters: a
	 * missing number is a full scan, and the deployment's bound holds. */
	set_ledger("lots\n");
	put("a1/k.tar.r.new", 1000, 0);
	ck_assert_int_eq(kz_snap_commit(at("a1/k.tar"), at("a1/k.tar.r.new"),
	                     &B, NULL, &ev, why, sizeof(why)),
	    0);
	ck_assert_int_eq(ev, 1);
	ck_assert(!has("a2/x.tar") && has("a2/y.tar"));
	ck_assert_int_eq(ledger(), 3000);
}
END_TEST

START_TEST(test_sweep_rewrites_ledger)
{
	int n = -1;

	mkd("a1");
	put("a1/fresh.tar", 10, 1000);
	put("a1/stale.tar", 10, 31 * DAY_MS);
	put("a1/y.tar.r.new", 10, 1000);
	set_ledger("999999\n");
	ck_assert_int_eq(kz_snap_sweep(dir, 30 * DAY_MS, &n), 0);
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(ledger(), 10);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("snap");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_path);
	tcase_add_test(tc, test_offer);
	tcase_add_test(tc, test_fresh);
	tcase_add_test(tc, test_commit_replaces);
	tcase_add_test(tc, test_commit_over_bound_alone);
	tcase_add_test(tc, test_commit_failures_drop_older);
	tcase_add_test(tc, test_commit_base);
	tcase_add_test(tc, test_commit_evicts_actor_lru);
	tcase_add_test(tc, test_commit_evicts_anyones_lru);
	tcase_add_test(tc, test_commit_concurrent);
	tcase_add_test(tc, test_commit_waits_for_lock);
	tcase_add_test(tc, test_sweep);
	tcase_add_test(tc, test_sweep_outdirs);
	tcase_add_test(tc, test_ledger_tracks_commits);
	tcase_add_test(tc, test_ledger_high_is_corrected_before_evicting);
	tcase_add_test(tc, test_ledger_garbage_is_rebuilt);
	tcase_add_test(tc, test_sweep_rewrites_ledger);
	suite_add_tcase(s, tc);
	return kz_check_run(s);
}
