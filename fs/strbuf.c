/* fs/strbuf.c — see strbuf.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "fs/strbuf.h"

static int grow(struct strbuf *s, size_t need)
{
	size_t nc = s->cap ? s->cap * 2 : 256;
	while (nc < need)
		nc *= 2;
	char *np = realloc(s->p, nc);
	if (!np)
		return -ENOMEM;
	s->p = np;
	s->cap = nc;
	return 0;
}

void strbuf_printf(struct strbuf *s, const char *fmt, ...)
{
	while (!s->err) {
		va_list ap;
		va_start(ap, fmt);
		size_t room = s->cap - s->len;
		int n = vsnprintf(s->p ? s->p + s->len : NULL, s->p ? room : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			s->err = -EINVAL;
		} else if (s->p && (size_t)n < room) {
			s->len += (size_t)n;
			return;
		} else {
			s->err = grow(s, s->len + (size_t)n + 1);
		}
	}
}

int strbuf_reserve(struct strbuf *s, size_t n)
{
	if (!s->err && s->len + n > s->cap)
		s->err = grow(s, s->len + n);
	return s->err;
}

void strbuf_nul(struct strbuf *s)
{
	if (!s->err && s->len + 1 >= s->cap)
		s->err = grow(s, s->len + 2);
	if (!s->err)
		s->p[s->len++] = '\0';
}
