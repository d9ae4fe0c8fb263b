/*
 * One validation, start to receipt: the job's inputs, the receipt body,
 * the run directory, the phases in order (runtime.c, phase.c).  Returns
 * the process exit code: 0 pass, 1 refused or failed, 2 bad input, 3
 * sandbox or loader unavailable, 4 internal.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kz_io.h"
#include "kz_json.h"
#include "kz_log.h"
#include "kz_path.h"
#include "kz_tree.h"
#include "pv.h"
#include "banned.h"

bool
pv_hex64(const char *s)
{
	if (s == NULL || strlen(s) != PV_DIGEST_HEX)
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

/*
 * The caller's files are read once, into a snapshot only the validator
 * may read or write (run/src, 0700): the artifact digest is the
 * snapshot's, and every later phase (the static read, the test copy, the
 * loader copy) is made from it, never from the caller's directory again,
 * so a tree that changes while it is validated cannot get a receipt for
 * bytes other than the ones validated.
 */
static int
snapshot(struct pv_job *j, int livefd)
{
	char src[sizeof(j->run) + 8];
	struct pv_tree live;
	int r;

	if (pv_tree_scan(livefd, false, &live, j->why, sizeof(j->why)) != 0)
		return KZ_EXIT_REFUSED;
	snprintf(j->run, sizeof(j->run), "%s/pv.XXXXXX", j->cwd);
	if (mkdtemp(j->run) == NULL || chmod(j->run, 0755) != 0) {
		j->run[0] = '\0';
		pv_tree_release(&live);
		kz_why(j->why, sizeof(j->why), "cannot make the run directory");
		return KZ_EXIT_INTERNAL;
	}
	snprintf(src, sizeof(src), "%s/src", j->run);
	r = pv_materialize(livefd, &live, AT_FDCWD, src, geteuid(), j->why,
	    sizeof(j->why));
	pv_tree_release(&live);
	if (r != 0)
		return KZ_EXIT_REFUSED;
	if (chmod(src, 0700) != 0 ||
	    (j->filesfd = open(src,
	         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		kz_why(j->why, sizeof(j->why), "cannot open the snapshot");
		return KZ_EXIT_INTERNAL;
	}
	return 0;
}

static int
job_open(struct pv_job *j, const char *profile, const char *files,
    const char *contract)
{
	int livefd, r;

	if (!pv_hex64(contract)) {
		kz_why(j->why, sizeof(j->why),
		    "contract digest must be 64 lowercase hex characters");
		return KZ_EXIT_USAGE;
	}
	if ((r = pv_workspace_check(j->cwd, sizeof(j->cwd), j->why,
	         sizeof(j->why))) != 0)
		return KZ_EXIT_USAGE;
	if (pv_profile_load(profile, j->c->deadline_max, &j->prof, j->why,
	        sizeof(j->why)) != 0)
		return KZ_EXIT_USAGE;
	j->deadline = kz_now_ms() + j->prof.deadline_ms;
	if ((livefd = open(files, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		kz_why(j->why, sizeof(j->why),
		    "cannot open the files directory");
		return KZ_EXIT_USAGE;
	}
	/* Resources first: nothing is copied before every one resolves. */
	r = pv_resources_check(livefd, &j->prof, j->why, sizeof(j->why)) != 0 ?
	    KZ_EXIT_REFUSED :
	    snapshot(j, livefd);
	close(livefd);
	if (r != 0)
		return r;
	/* The snapshot is what is validated: its resources and digest. */
	if (pv_resources_check(j->filesfd, &j->prof, j->why, sizeof(j->why)) !=
	        0 ||
	    pv_tree_scan(j->filesfd, false, &j->tree, j->why, sizeof(j->why)) !=
	        0)
		return KZ_EXIT_REFUSED;
	for (size_t i = 0; i < j->tree.n; i++)
		if (strncmp(j->tree.paths[i], "node_modules/", 13) == 0) {
			kz_why(j->why, sizeof(j->why),
			    "dependencies come from "
			    "the lock, not from the files");
			return KZ_EXIT_REFUSED;
		}
	return 0;
}

static int
job_body(struct pv_job *j, const char *contract)
{
	char tag[] = "kz-pi-validate " KZ_VERSION;

	if ((j->body = cJSON_CreateObject()) == NULL)
		return KZ_EXIT_INTERNAL;
	cJSON_AddNumberToObject(j->body, "v", 1);
	cJSON_AddStringToObject(j->body, "validator", tag);
	cJSON_AddStringToObject(j->body, "kind",
	    j->prof.kind == PV_SKILL ? "skill" : "extension");
	cJSON_AddStringToObject(j->body, "artifact_sha256", j->tree.digest);
	cJSON_AddStringToObject(j->body, "profile_sha256", j->prof.sha256);
	cJSON_AddStringToObject(j->body, "contract_digest", contract);
	cJSON_AddNumberToObject(j->body, "files", (double)j->tree.n);
	cJSON_AddNumberToObject(j->body, "bytes", (double)j->tree.total);
	cJSON_AddNumberToObject(j->body, "validated_at", (double)time(NULL));
	j->v.reasons = cJSON_AddArrayToObject(j->body, "reasons");
	j->v.diags = cJSON_AddArrayToObject(j->body, "diagnostics");
	if (j->v.reasons == NULL || j->v.diags == NULL)
		return KZ_EXIT_INTERNAL;
	return 0;
}

static int
write_receipt(struct pv_job *j, const char *out)
{
	char *text = NULL;
	size_t len;
	int fd, rc = 0;

	cJSON_AddStringToObject(j->body, "result",
	    j->v.failed ? "fail" : "pass");
	if (pv_receipt_sign(j->body, j->c->keyfile, &text, j->why,
	        sizeof(j->why)) != 0)
		return KZ_EXIT_UNAVAIL;
	len = strlen(text);
	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
	    0644);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len ||
	    write(fd, "\n", 1) != 1) {
		kz_why(j->why, sizeof(j->why), "cannot write the receipt");
		rc = KZ_EXIT_USAGE;
	}
	if (fd >= 0)
		close(fd);
	free(text);
	return rc;
}

static int
job_run(struct pv_job *j)
{
	char home[PATH_MAX + 8], load[PATH_MAX + 8];
	int rc;

	if ((rc = pv_runtime(j)) != 0)
		return rc;
	if (pv_static_read(j->filesfd, &j->prof,
	        cJSON_AddObjectToObject(j->body, "static"), j->why,
	        sizeof(j->why)) != 0) {
		pv_reason(&j->v, "static resource: ", j->why);
		return 0;
	}
	snprintf(home, sizeof(home), "%s/home", j->run);
	if (mkdir(home, 0700) != 0 || chown(home, j->c->uid, j->c->uid) != 0)
		return KZ_EXIT_INTERNAL;
	if (j->prof.kind == PV_EXTENSION) {
		if ((rc = pv_phase_tests(j)) != 0 || j->v.failed)
			return rc;
	}
	snprintf(load, sizeof(load), "%s/load", j->run);
	if ((rc = pv_phase_prepare(j, load)) != 0 || j->v.failed)
		return rc;
	return pv_phase_load(j, load);
}

/*
 * In the unshare mode every validation's code runs as the one KZ_PI_UID
 * and sees the host's files, so two at once could each change the
 * other's test and loader trees while they are validated: a receipt would
 * then hold for bytes that were not what ran.  So validations in that mode
 * run one at a time on a host, under an exclusive lock on PV_UNSHARE_LOCK
 * taken before anything of the job is made (its deadline counts from
 * then).  A lock not had within KZ_PI_DEADLINE_MAX_MS (the longest
 * another validation may take) is the validator unavailable.  The lock
 * goes with the process.
 */
static int
unshare_lock(struct pv_job *j, int *fd)
{
	int64_t until = kz_now_ms() + j->c->deadline_max;

	*fd = open(PV_UNSHARE_LOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
	    0600);
	if (*fd < 0) {
		kz_why(j->why, sizeof(j->why), "cannot open %s: %s",
		    PV_UNSHARE_LOCK, strerror(errno));
		return KZ_EXIT_UNAVAIL;
	}
	while (flock(*fd, LOCK_EX | LOCK_NB) != 0) {
		if ((errno != EWOULDBLOCK && errno != EINTR) ||
		    kz_now_ms() >= until) {
			kz_why(j->why, sizeof(j->why),
			    "unshare mode: another validation held %s "
			    "longer than KZ_PI_DEADLINE_MAX_MS",
			    PV_UNSHARE_LOCK);
			return KZ_EXIT_UNAVAIL;
		}
		nanosleep(&(struct timespec){.tv_nsec = 50000000}, NULL);
	}
	return 0;
}

int
pv_validate(const struct pv_conf *c, const char *profile, const char *files,
    const char *contract, const char *out)
{
	struct pv_job j;
	int rc, lock = -1;

	memset(&j, 0, sizeof(j));
	j.c = c;
	j.filesfd = -1;
	if (c->iso == PV_ISO_UNSHARE && (rc = unshare_lock(&j, &lock)) != 0)
		goto out;
	if ((rc = job_open(&j, profile, files, contract)) != 0)
		goto out;
	if ((rc = job_body(&j, contract)) != 0)
		goto out;
	if ((rc = job_run(&j)) != 0)
		goto out;
	if ((rc = write_receipt(&j, out)) == 0)
		rc = j.v.failed ? KZ_EXIT_REFUSED : KZ_EXIT_OK;
	if (j.v.failed && cJSON_GetArraySize(j.v.reasons) > 0)
		kz_why(j.why, sizeof(j.why), "%s",
		    cJSON_GetArrayItem(j.v.reasons, 0)->valuestring);
out:
	if (j.run[0] != '\0' && kz_tree_remove(AT_FDCWD, j.run) != 0)
		kz_log(KZ_LOG_WARN, "pi.cleanup", KZ_ESYS,
		    "could not remove the run directory", NULL);
	if (rc != 0)
		kz_log(rc == 1 ? KZ_LOG_INFO : KZ_LOG_ERROR,
		    rc == 1 ? "pi.refuse" : "pi.fail", 0, j.why, "artifact",
		    j.tree.digest[0] ? j.tree.digest : NULL, NULL);
	else
		kz_log(KZ_LOG_INFO, "pi.pass", 0, "validation passed",
		    "artifact", j.tree.digest, NULL);
	if (rc != 0)
		fprintf(stderr, "kz-pi-validate: %s\n", j.why);
	if (j.filesfd >= 0)
		close(j.filesfd);
	if (lock >= 0)
		close(lock);
	cJSON_Delete(j.body);
	pv_tree_release(&j.tree);
	pv_profile_release(&j.prof);
	return rc;
}
