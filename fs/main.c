/*
 * fs/main.c — the tierfs command: tierfs CONFIG MOUNTPOINT [-f] [-d] [-o opt,...]
 *
 * Follows the mount.fuse convention so fstab works:
 *   /etc/tierfs.conf  /mnt/tierfs  fuse.tierfs  defaults  0 0
 * A bad config is reported as "tierfs: CONFIG:LINE: key 'x': reason" with
 * exit status 2 before anything is mounted. The daemon serves requests
 * with its own pool of workers (fs/loop.c; libfuse's single-threaded loop
 * with -s); unmount or SIGTERM/SIGINT end the loop,
 * after which every dirty block is made durable before the process exits.
 * SIGHUP reloads the config (fs/reload.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "fs/config/config_load.h"
#include "fs/fs.h"
#include "fs/loop.h"
#include "fs/reload.h"

static void warn_stderr(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "tierfs: %s\n", msg);
}

#ifndef TIERFS_EXAMPLES
#define TIERFS_EXAMPLES "/usr/local/share/doc/tierfs/examples"
#endif
#define TIERFS_VERSION "0.1"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tierfs CONFIG MOUNTPOINT [-f] [-d] [-s] [-o opt[,opt...]]\n"
		"\n"
		"Mount the tiered filesystem described by the INI file CONFIG.\n"
		"  -f             stay in the foreground\n"
		"  -d             debug: foreground, log every FUSE request\n"
		"  -s             single-threaded (for debugging)\n"
		"  -o OPTS        mount options: ro, noatime, allow_other, and the usual\n"
		"                 FUSE ones\n"
		"  -h, --help     this text\n"
		"  -V, --version  the version\n"
		"\n"
		"fstab:  CONFIG  MOUNTPOINT  fuse.tierfs  defaults,_netdev  0 0\n"
		"Reload the config (live keys change at once, the others need a remount):\n"
		"        kill -HUP PID   or   echo reload > MOUNTPOINT/.tierfs/reload\n"
		"Unmount: fusermount3 -u MOUNTPOINT (the daemon writes back every dirty\n"
		"block and exits; wait for it before mounting the same metadata again).\n"
		"Exit status: 0 ok, 1 mount or runtime failure, 2 bad config or usage.\n"
		"\n"
		"Example configs: %s\n"
		"Manuals: tierfs(8), tierfs.conf(5), tierfs-update(1)\n",
		TIERFS_EXAMPLES);
}

/* Only one daemon may own a metadata directory: a second one would
 * allocate the same slots. Wait a little for one that is still flushing. */
static int lock_metadata(const char *dir)
{
	char path[PATH_MAX + 32];
	if (mkdir(dir, 0700) && errno != EEXIST) {
		fprintf(stderr, "tierfs: metadata %s: %s\n", dir, strerror(errno));
		return -1;
	}
	snprintf(path, sizeof(path), "%s/tierfs.lock", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(stderr, "tierfs: %s: %s\n", path, strerror(errno));
		return -1;
	}
	for (int i = 0; i < 300; i++) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return fd;
		if (errno != EWOULDBLOCK) {
			fprintf(stderr, "tierfs: %s: lock: %s\n", path, strerror(errno));
			break;
		}
		if (i == 0)
			fprintf(stderr,
				"tierfs: metadata %s is in use by another tierfs; waiting\n", dir);
		usleep(100000);
	}
	if (flock(fd, LOCK_EX | LOCK_NB))
		fprintf(stderr, "tierfs: metadata %s is still in use by another tierfs\n", dir);
	else
		return fd;
	close(fd);
	return -1;
}

/*
 * Detaching. libfuse's fuse_daemonize() forks after the mount, but by then
 * the tiers' completion threads and the flusher run, and a forked child
 * keeps only the calling thread. So fork first, before any thread exists:
 * the parent waits on a pipe for the child's verdict (0 mounted, else an
 * exit status) and exits with it, so mount errors still reach the caller.
 * The child's stderr, where every module logs, goes to syslog.
 */
static int ready_fd = -1;

static void *stderr_to_syslog(void *arg)
{
	FILE *f = fdopen((int)(intptr_t)arg, "r");
	char line[1024];
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		syslog(LOG_NOTICE, "%s", strncmp(line, "tierfs: ", 8) ? line : line + 8);
	}
	return NULL;
}

static int detach_begin(void)
{
	int p[2];
	if (pipe(p)) {
		perror("tierfs: pipe");
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("tierfs: fork");
		return -1;
	}
	if (pid > 0) {
		close(p[1]);
		unsigned char status = 1;
		ssize_t n;
		while ((n = read(p[0], &status, 1)) < 0 && errno == EINTR)
			;
		_exit(n == 1 ? status : 1);
	}
	close(p[0]);
	ready_fd = p[1];
	if (setsid() < 0)
		perror("tierfs: setsid");
	return 0;
}

/* Tell the waiting parent how it went; on success leave the terminal. */
static void detach_end(int status)
{
	if (ready_fd < 0)
		return;
	if (status == 0) {
		int null = open("/dev/null", O_RDWR);
		int lp[2];
		pthread_t th;
		if (null >= 0) {
			dup2(null, STDIN_FILENO);
			dup2(null, STDOUT_FILENO);
			close(null);
		}
		openlog("tierfs", LOG_PID, LOG_DAEMON);
		if (!pipe(lp) &&
		    !pthread_create(&th, NULL, stderr_to_syslog, (void *)(intptr_t)lp[0])) {
			dup2(lp[1], STDERR_FILENO);
			close(lp[1]);
			pthread_detach(th);
		}
		if (chdir("/"))
			syslog(LOG_WARNING, "chdir /: %m");
	}
	unsigned char b = (unsigned char)status;
	if (write(ready_fd, &b, 1) != 1)
		syslog(LOG_WARNING, "could not report to the parent: %m");
	close(ready_fd);
	ready_fd = -1;
}

/* Whether PATH is DIR or below it; both resolved. */
static bool path_within(const char *path, const char *dir)
{
	size_t l = strlen(dir);
	return !strncmp(path, dir, l) && (path[l] == '\0' || path[l] == '/' || !strcmp(dir, "/"));
}

/* The mount point must be a directory, and no tier nor the metadata may
 * live under it: the daemon would do its own I/O through its own mount and
 * hang there, unkillable. Returns 0 or the exit status. */
static int check_mountpoint(const struct config *c, const char *mnt)
{
	char m[PATH_MAX], p[PATH_MAX];
	struct stat st;
	if (!realpath(mnt, m) || stat(m, &st)) {
		fprintf(stderr, "tierfs: mount point %s: %s\n", mnt, strerror(errno));
		return 2;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "tierfs: mount point %s: not a directory\n", mnt);
		return 2;
	}
	for (int i = 0; i < c->ntiers; i++) {
		const struct conf_tier *t = &c->tiers[i];
		if (t->path[0] && realpath(t->path, p) && path_within(p, m)) {
			fprintf(stderr,
				"tierfs: %s:%d: section [tier %s]: path %s is inside the mount "
				"point %s\n",
				c->path, t->line, t->name, t->path, mnt);
			return 2;
		}
	}
	/* The metadata directory may not exist yet: its parent then. */
	char meta[PATH_MAX];
	snprintf(meta, sizeof(meta), "%s", c->metadata);
	char *slash = strrchr(meta, '/');
	bool have = realpath(meta, p) != NULL;
	if (!have && slash && slash != meta) {
		*slash = '\0';
		have = realpath(meta, p) != NULL;
	}
	if (have && path_within(p, m)) {
		fprintf(stderr, "tierfs: %s: metadata %s is inside the mount point %s\n", c->path,
			c->metadata, mnt);
		return 2;
	}
	return 0;
}

/* Append the -o options USER (comma-separated, consumed) to OPTS. mount.fuse
 * passes options of its own ("rw", "defaults" are dropped by it); keep the
 * ones libfuse knows. Returns 0 or the exit status. */
static int add_user_opts(char *opts, size_t size, char *user, bool *noatime)
{
	char *save = NULL;
	bool ro = false;
	for (char *o = strtok_r(user, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
		/* The kernel leaves atime to a FUSE daemon, which learns of the
		 * options only here. relatime is the default, strictatime is
		 * taken as it. */
		if (!strcmp(o, "noatime"))
			*noatime = true;
		else if (!strcmp(o, "relatime") || !strcmp(o, "strictatime") || !strcmp(o, "atime"))
			*noatime = false;
		else if (!strcmp(o, "ro"))
			ro = true;
		else if (!strcmp(o, "rw"))
			ro = false;
		if (!strcmp(o, "defaults") || !strcmp(o, "default_permissions") ||
		    !strcmp(o, "_netdev") || !strcmp(o, "nofail") || !strcmp(o, "auto") ||
		    !strcmp(o, "noauto") || !strcmp(o, "user") || !strcmp(o, "users"))
			continue;
		if (!strncmp(o, "max_read=", 9)) {
			/* libfuse would refuse to mount at all, and the daemon
			 * would exit 0: the loop's buffers are sized for the
			 * 1 MiB it sets itself. */
			fprintf(stderr, "tierfs: -o %s: tierfs sets max_read itself\n", o);
			return 2;
		}
		if (strlen(opts) + strlen(o) + 2 > size) {
			fprintf(stderr, "tierfs: -o options too long\n");
			return 2;
		}
		strcat(opts, ",");
		strcat(opts, o);
	}
	/* A read-only mount writes no atime either: its user expects the
	 * tiers and the metadata left as they are. */
	if (ro)
		*noatime = true;
	return 0;
}

/* The RAM tier must hold what the FUSE workers have in hand at once: said
 * here, with the config line, rather than by the mount after its probes.
 * Returns 0 or the exit status. */
static int check_ram(const struct config *c)
{
	const struct conf_tier *r = &c->tiers[c->ram_tier];
	uint64_t min = fs_cache_min_blocks(c) * c->block_size;
	if (r->capacity >= min)
		return 0;
	unsigned long long mib = (min + (1 << 20) - 1) >> 20;
	if (r->implicit)
		fprintf(
		    stderr,
		    "tierfs: %s: the default ram tier (%llu MiB) is too small for threads = %u "
		    "and block_size = %u: add a [tier ram] with a capacity of at least %llu MiB\n",
		    c->path, (unsigned long long)(r->capacity >> 20), c->threads, c->block_size,
		    mib);
	else
		fprintf(stderr,
			"tierfs: %s:%d: section [tier %s]: capacity %llu MiB is too small for "
			"threads = %u and block_size = %u: at least %llu MiB\n",
			c->path, r->line, r->name, (unsigned long long)(r->capacity >> 20),
			c->threads, c->block_size, mib);
	return 2;
}

int main(int argc, char **argv)
{
	const char *conf_path = NULL, *mnt = NULL;
	bool foreground = false, debug = false, single = false;
	char opts[4096] = "default_permissions,fsname=tierfs,subtype=tierfs,max_read=1048576";
	char *user_opts = NULL;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "-V") || !strcmp(a, "--version")) {
			printf("tierfs %s (libfuse %s)\n"
			       "Example configs: %s\n",
			       TIERFS_VERSION, fuse_pkgversion(), TIERFS_EXAMPLES);
			return 0;
		} else if (!strcmp(a, "--list-keys")) {
			/* Not in --help: the parser's key table, for the
			 * check that tierfs.conf(5) documents every key. */
			config_list_keys(stdout);
			return 0;
		} else if (!strcmp(a, "-f")) {
			foreground = true;
		} else if (!strcmp(a, "-d")) {
			debug = foreground = true;
		} else if (!strcmp(a, "-s")) {
			single = true;
		} else if (!strncmp(a, "-o", 2)) {
			const char *o = a[2] ? a + 2 : (i + 1 < argc ? argv[++i] : NULL);
			if (!o) {
				fprintf(stderr, "tierfs: -o needs an argument\n");
				return 2;
			}
			size_t l = user_opts ? strlen(user_opts) : 0;
			char *n = realloc(user_opts, l + strlen(o) + 2);
			if (!n)
				return 1;
			if (l)
				n[l++] = ',';
			strcpy(n + l, o);
			user_opts = n;
		} else if (a[0] == '-') {
			fprintf(stderr, "tierfs: unknown option %s\n", a);
			usage(stderr);
			return 2;
		} else if (!conf_path) {
			conf_path = a;
		} else if (!mnt) {
			mnt = a;
		} else {
			fprintf(stderr, "tierfs: unexpected argument %s\n", a);
			return 2;
		}
	}
	if (!conf_path || !mnt) {
		usage(stderr);
		return 2;
	}

	/* SIGHUP reloads the config; fs/reload.c's thread takes it with
	 * sigwaitinfo. Blocked before any thread exists, so every thread
	 * inherits the mask and none is interrupted by it. */
	sigset_t hup;
	sigemptyset(&hup);
	sigaddset(&hup, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &hup, NULL);

	static struct fs fs;
	g_fs = &fs;
	int rc;
	char err[PATH_MAX + 512];
	struct config_lines *lines = NULL;
	if (config_load_lines(conf_path, &fs.conf, err, sizeof(err), warn_stderr, NULL, &lines)) {
		fprintf(stderr, "tierfs: %s\n", err);
		free(user_opts);
		return 2;
	}
	/* A reload reads it again after the daemon left its directory. */
	char *conf_abs = realpath(conf_path, NULL);
	if (!conf_abs) {
		fprintf(stderr, "tierfs: %s: %s\n", conf_path, strerror(errno));
		rc = 2;
		goto out_early;
	}
	if ((rc = check_mountpoint(&fs.conf, mnt)) || (rc = check_ram(&fs.conf)))
		goto out_early;

	if (fs.conf.allow_other)
		strcat(opts, ",allow_other");
	if (user_opts && (rc = add_user_opts(opts, sizeof(opts), user_opts, &fs.noatime)))
		goto out_early;

	if (!foreground && detach_begin()) {
		rc = 1;
		goto out_early;
	}
	int lockfd = lock_metadata(fs.conf.metadata);
	if (lockfd < 0) {
		detach_end(1);
		rc = 1;
		goto out_early;
	}

	rc = fs_mount_prepare(&fs);
	if (rc) {
		fprintf(stderr, "tierfs: %s: cannot start: %s\n", conf_path, strerror(-rc));
		fs_unmount_finish(&fs);
		rc = fs.tier_open_failed ? 2 : 1;
		detach_end(rc);
		close(lockfd);
		goto out_early;
	}
	free(user_opts);
	user_opts = NULL;

	char *fargv[] = {argv[0], "-o", opts, debug ? "-d" : NULL, NULL};
	struct fuse_args args = FUSE_ARGS_INIT(debug ? 4 : 3, fargv);
	int ret = 1;
	struct fuse_session *se = fuse_session_new(&args, &tierfs_ops, sizeof(tierfs_ops), &fs);
	if (!se) {
		fprintf(stderr, "tierfs: bad mount options: %s\n", opts);
		goto out_fs;
	}
	fs.se = se;
	/* A daemon started in the background by a script inherits SIGINT
	 * ignored, and libfuse only catches signals left at their default:
	 * an explicit kill -INT must still end it cleanly. */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	if (fuse_set_signal_handlers(se))
		goto out_se;
	if (fuse_session_mount(se, mnt)) {
		fprintf(stderr, "tierfs: cannot mount on %s\n", mnt);
		goto out_sig;
	}
	detach_end(0);
	rc = fs_reload_start(&fs, conf_abs, lines);
	lines = NULL; /* the reload module's now */
	if (rc)
		TFS_LOG("%s: reload on SIGHUP unavailable: %s", conf_abs, strerror(-rc));
	if (single) {
		ret = fuse_session_loop(se);
	} else {
		ret = loop_run(&fs, se);
	}
	ret = ret < 0 ? 1 : 0;
	fs_reload_stop(&fs);
	fuse_session_unmount(se);
out_sig:
	fuse_remove_signal_handlers(se);
out_se:
	fuse_session_destroy(se);
out_fs:
	detach_end(1);		   /* no-op once reported */
	fuse_opt_free_args(&args); /* libfuse may have grown it */
	fs_unmount_finish(&fs);
	close(lockfd);
	config_lines_free(lines);
	free(conf_abs);
	return ret;

out_early:
	/* Nothing mounted: RC is the exit status. */
	free(user_opts);
	config_lines_free(lines);
	free(conf_abs);
	return rc;
}
