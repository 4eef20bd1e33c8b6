/*
 * tests/fuzz/replay.c — runs a harness over stored inputs, without
 * libFuzzer: `fuzz_NAME DIR_OR_FILE...`.
 *
 * This is how `make test` keeps every crash the fuzzers found fixed: it
 * feeds each harness its seed corpus and its regression inputs (files
 * named after the crash they reproduce) in the normal and the sanitizer
 * build, with no compiler beyond the one that builds the daemon. An input
 * that crashes takes the process down, and the test with it; the last
 * line on stderr names the file.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/fuzz/fuzz.h"

/* Harnesses without state to build leave this out. */
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

static int run_file(const char *path, unsigned *count)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -errno;
	}
	struct stat st;
	if (fstat(fd, &st)) {
		int rc = -errno;
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		close(fd);
		return rc;
	}
	size_t n = (size_t)st.st_size;
	/* An input of its exact size, so ASan sees a read past its end. */
	uint8_t *buf = malloc(n ? n : 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			int rc = r < 0 ? -errno : -EIO;
			fprintf(stderr, "replay: %s: short read\n", path);
			free(buf);
			close(fd);
			return rc;
		}
		got += (size_t)r;
	}
	close(fd);
	fprintf(stderr, "replay: %s\n", path);
	LLVMFuzzerTestOneInput(buf, n);
	free(buf);
	(*count)++;
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *dir, unsigned *count)
{
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
		return -errno;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			char **nn = realloc(names, cap * sizeof(*nn));
			if (!nn) {
				rc = -ENOMEM;
				break;
			}
			names = nn;
		}
		if (asprintf(&names[n], "%s/%s", dir, e->d_name) < 0) {
			rc = -ENOMEM;
			break;
		}
		n++;
	}
	closedir(d);
	/* Name order, so that a run is the same run every time. */
	if (n)
		qsort(names, n, sizeof(*names), cmp_names);
	for (size_t i = 0; i < n; i++) {
		if (!rc)
			rc = run_file(names[i], count);
		free(names[i]);
	}
	free(names);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s DIR_OR_FILE...\n", argv[0]);
		return 2;
	}
	LLVMFuzzerInitialize(&argc, &argv);
	unsigned count = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st)) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		int rc = S_ISDIR(st.st_mode) ? run_dir(argv[i], &count) : run_file(argv[i], &count);
		if (rc)
			return 1;
	}
	printf("%u inputs\n", count);
	return 0;
}
