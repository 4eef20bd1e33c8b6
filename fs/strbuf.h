/*
 * fs/strbuf.h — a growing text buffer for the views tierfs computes (xattr
 * values, .tierfs/stats). The first error sticks: callers print freely and
 * check err once at the end.
 */
#ifndef TIERFS_STRBUF_H
#define TIERFS_STRBUF_H

#include <stddef.h>

struct strbuf {
	char *p;
	size_t len, cap;
	int err; /* 0 or -errno */
};

void strbuf_printf(struct strbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Room for N more bytes at p + len, for a caller that writes them there
 * and adds N to len: 0 or the (sticky) error. */
int strbuf_reserve(struct strbuf *s, size_t n);
/* Append one NUL byte as content (listxattr's separator). */
void strbuf_nul(struct strbuf *s);

#endif
