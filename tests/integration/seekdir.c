/*
 * seekdir DIR MAXOFF NAME... — for every offset 0..MAXOFF, open DIR, lseek
 * there and read the directory with getdents64: every read must succeed,
 * every entry be well formed, and every name be ".", ".." or one of NAME.
 * A directory offset is a cookie, but a user may lseek to any number: the
 * file system must answer with whole entries, never bytes from inside one
 * (t_observe, on .tierfs/tiers/NAME). Exit 0 when all hold, 1 otherwise.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int known(const char *name, int argc, char **argv)
{
	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return 1;
	for (int i = 3; i < argc; i++)
		if (!strcmp(name, argv[i]))
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: seekdir DIR MAXOFF NAME...\n");
		return 2;
	}
	long maxoff = atol(argv[2]);
	static char buf[65536];
	int bad = 0;
	for (long off = 0; off <= maxoff; off++) {
		int fd = open(argv[1], O_RDONLY | O_DIRECTORY);
		if (fd < 0) {
			fprintf(stderr, "open %s: %s\n", argv[1], strerror(errno));
			return 1;
		}
		if (lseek(fd, off, SEEK_SET) < 0) {
			fprintf(stderr, "offset %ld: lseek: %s\n", off, strerror(errno));
			bad++;
		} else {
			long n = syscall(SYS_getdents64, fd, buf, sizeof(buf));
			if (n < 0) {
				fprintf(stderr, "offset %ld: getdents64: %s\n", off,
					strerror(errno));
				bad++;
			}
			for (long p = 0; p < n;) {
				struct dirent64 *d = (void *)(buf + p);
				if (d->d_reclen == 0 || p + d->d_reclen > n ||
				    !memchr(d->d_name, 0,
					    d->d_reclen - offsetof(struct dirent64, d_name)) ||
				    !known(d->d_name, argc, argv)) {
					fprintf(stderr, "offset %ld: a bad entry at byte %ld\n",
						off, p);
					bad++;
					break;
				}
				p += d->d_reclen;
			}
		}
		close(fd);
		if (bad > 10)
			break;
	}
	return bad ? 1 : 0;
}
