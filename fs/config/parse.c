/*
 * fs/config/parse.c — config_load(): read the file, count its lines, see
 * its sections, hand each key to its section (keys.c), then run the
 * whole-file checks (validate.c).
 *
 * inih does the key = value tokenising (comments, whitespace, inline ';'
 * comments). Everything else is ours because inih 55 gives the handler no
 * line number and only calls it for keys:
 *   - the file is read into memory and fed to ini_parse_stream() through a
 *     reader that counts lines, so when the handler runs, P->line is the
 *     line of the key being handled (multi-line values are turned off, so
 *     inih never reads ahead of the key it reports);
 *   - the reader also recognises "[section]" lines itself, so headers get a
 *     line number and empty or unknown sections are still seen.
 * Checks that need the whole file (stripe and rule tier names, required
 * keys, defaults that depend on other sections) run after parsing and use
 * the line numbers recorded during it.
 *
 * Not thread-safe: config_load() sets inih's process-wide options. It is
 * called once, at startup, before any thread exists.
 */
#include "fs/config/config_load.h"
#include "fs/config/parse_state.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Longest config file we read: configs are a few KiB. */
#define CONF_FILE_MAX (4 * MIB)

void __attribute__((format(printf, 4, 5)))
config_key_error(struct config_parse *p, int line, const char *key, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (p->failed)
		return; /* the first error is the one the user needs */
	p->failed = true;
	n = snprintf(p->err, p->errlen, "%s:%d: key '%s': ", p->c->path, line, key);
	if (n < 0 || (size_t)n >= p->errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

void __attribute__((format(printf, 4, 5)))
config_sect_error(struct config_parse *p, int line, const char *sect, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (p->failed)
		return;
	p->failed = true;
	n = snprintf(p->err, p->errlen, "%s:%d: section [%s]: ", p->c->path, line, sect);
	if (n < 0 || (size_t)n >= p->errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

void __attribute__((format(printf, 3, 4)))
config_line_error(struct config_parse *p, int line, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (p->failed)
		return;
	p->failed = true;
	n = snprintf(p->err, p->errlen, "%s:%d: ", p->c->path, line);
	if (n < 0 || (size_t)n >= p->errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

static bool valid_name(const char *s, size_t max, bool allow_dot)
{
	size_t n = strlen(s);

	if (n == 0 || n > max)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' &&
		    !(allow_dot && *s == '.'))
			return false;
	return true;
}

/* ---- sections (seen by the reader, so they have a line) -------------- */

static void section_begin(struct config_parse *p, char *name)
{
	struct config *c = p->c;
	char *arg;

	/* "[ tier  nvme0 ]" is "[tier nvme0]". */
	while (isspace((unsigned char)*name))
		name++;
	for (char *e = name + strlen(name); e > name && isspace((unsigned char)e[-1]);)
		*--e = '\0';
	arg = name + strcspn(name, " \t");
	if (*arg) {
		*arg++ = '\0';
		while (isspace((unsigned char)*arg))
			arg++;
	}

	p->sect_line = p->line;
	p->idx = -1;
	if (!strcmp(name, "mount") || !strcmp(name, "policy") || !strcmp(name, "expert")) {
		enum sect_kind kind = name[0] == 'm'   ? S_MOUNT
				      : name[0] == 'p' ? S_POLICY
						       : S_EXPERT;
		snprintf(p->sect_name, sizeof(p->sect_name), "%.*s", CONF_NAME_MAX, name);
		if (*arg) {
			config_sect_error(p, p->line, name, "takes no name (found '%s')", arg);
			return;
		}
		int *seen = kind == S_MOUNT    ? &p->mount_line
			    : kind == S_POLICY ? &p->policy_line
					       : &p->expert_line;
		if (*seen) {
			config_sect_error(p, p->line, name, "given twice (first on line %d)",
					  *seen);
			return;
		}
		*seen = p->line;
		p->sect = kind;
		return;
	}
	if (!strcmp(name, "tier")) {
		snprintf(p->sect_name, sizeof(p->sect_name), "tier %.*s", CONF_NAME_MAX - 1, arg);
		if (!valid_name(arg, TIER_NAME_MAX - 1, false)) {
			config_sect_error(p, p->line, p->sect_name,
					  "tier name must be 1-%d characters of A-Z a-z 0-9 _ -",
					  TIER_NAME_MAX - 1);
			return;
		}
		int dup = config_tier_index(c, arg);
		if (dup >= 0) {
			config_sect_error(p, p->line, p->sect_name,
					  "duplicate tier name '%s' (first on line %d)", arg,
					  c->tiers[dup].line);
			return;
		}
		if (c->ntiers >= CONF_MAX_TIERS) {
			config_sect_error(p, p->line, p->sect_name, "too many tiers (at most %d)",
					  CONF_MAX_TIERS);
			return;
		}
		p->idx = c->ntiers++;
		struct conf_tier *t = &c->tiers[p->idx];
		snprintf(t->name, sizeof(t->name), "%s", arg);
		t->line = p->line;
		p->sect = S_TIER;
		return;
	}
	if (!strcmp(name, "rule")) {
		snprintf(p->sect_name, sizeof(p->sect_name), "rule %.*s", CONF_NAME_MAX - 1, arg);
		if (!valid_name(arg, CONF_NAME_MAX - 1, true)) {
			config_sect_error(p, p->line, p->sect_name,
					  "rule name must be 1-%d characters of A-Z a-z 0-9 _ - .",
					  CONF_NAME_MAX - 1);
			return;
		}
		for (int i = 0; i < c->nrules; i++) {
			if (!strcmp(c->rules[i].name, arg)) {
				config_sect_error(p, p->line, p->sect_name,
						  "duplicate rule name '%s' (first on line %d)",
						  arg, c->rules[i].line);
				return;
			}
		}
		if (c->nrules >= CONF_MAX_RULES) {
			config_sect_error(p, p->line, p->sect_name, "too many rules (at most %d)",
					  CONF_MAX_RULES);
			return;
		}
		p->idx = c->nrules++;
		struct conf_rule *r = &c->rules[p->idx];
		snprintf(r->name, sizeof(r->name), "%s", arg);
		r->line = p->line;
		r->tier = -1;
		r->persistent = true;
		p->sect = S_RULE;
		return;
	}
	snprintf(p->sect_name, sizeof(p->sect_name), "%.*s%s%.*s", CONF_NAME_MAX - 1, name,
		 *arg ? " " : "", CONF_NAME_MAX - 1, arg);
	config_sect_error(
	    p, p->line, p->sect_name,
	    "unknown section (expected [mount], [tier NAME], [policy], [expert] or [rule NAME])");
	p->sect = S_UNKNOWN;
}

/* ---- the inih reader: hands out lines, counts them, sees sections ---- */

/* If LINE (LEN bytes, no newline) is a "[name]" header the way inih sees
 * one, start that section. */
static void maybe_section(struct config_parse *p, const char *line, size_t len)
{
	char tmp[CONF_LINE_MAX];
	const char *s = line, *e = line + len;

	if (p->line == 1 && len >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3))
		s += 3; /* UTF-8 BOM, which inih skips too */
	while (s < e && isspace((unsigned char)*s))
		s++;
	if (s == e || *s != '[')
		return;
	s++;
	/* inih ends the name at the first ']' (an inline ';' comment before it
	 * makes the line a syntax error, which inih reports). A ';' counts as
	 * a comment only after a space, as in inih: "[;x]" names a section. */
	const char *close = memchr(s, ']', (size_t)(e - s));
	if (!close)
		return;
	for (const char *q = s; q < close; q++)
		if (*q == ';' && q > s && isspace((unsigned char)q[-1]))
			return;
	size_t n = (size_t)(close - s);
	memcpy(tmp, s, n);
	tmp[n] = '\0';
	section_begin(p, tmp);
}

static char *reader(char *str, int num, void *stream)
{
	struct config_parse *p = stream;

	if (p->failed || p->pos >= p->len || num < 2)
		return NULL;
	if (p->at_line_start) {
		const char *start = p->buf + p->pos;
		const char *nl = memchr(start, '\n', p->len - p->pos);
		size_t len = nl ? (size_t)(nl - start) : p->len - p->pos;

		p->line++;
		if (len && start[len - 1] == '\r')
			len--;
		if (len >= CONF_LINE_MAX - 1) {
			config_line_error(p, p->line, "line too long (more than %d characters)",
					  CONF_LINE_MAX - 2);
			return NULL;
		}
		if (memchr(start, '\0', len)) {
			config_line_error(p, p->line, "contains a NUL byte");
			return NULL;
		}
		maybe_section(p, start, len);
		if (p->failed)
			return NULL;
	}
	/* fgets semantics: up to num-1 bytes, stop after '\n'. inih calls us
	 * again for the rest of a line that did not fit. */
	size_t n = 0;
	while (n < (size_t)num - 1 && p->pos < p->len) {
		char ch = p->buf[p->pos++];
		str[n++] = ch;
		if (ch == '\n')
			break;
	}
	str[n] = '\0';
	p->at_line_start = str[n - 1] == '\n';
	return str;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
	struct config_parse *p = user;

	(void)section; /* ours, from the reader: it has the line and no length limit */
	if (p->failed)
		return 0;
	switch (p->sect) {
	case S_NONE:
		config_key_error(p, p->line, name,
				 "outside any section (start with [mount] or [tier NAME])");
		break;
	case S_MOUNT:
		config_key_mount(p, name, value);
		break;
	case S_TIER:
		config_key_tier(p, name, value);
		break;
	case S_POLICY:
		config_key_policy(p, name, value);
		break;
	case S_EXPERT:
		config_key_expert(p, name, value);
		break;
	case S_RULE:
		config_key_rule(p, name, value);
		break;
	case S_UNKNOWN:
		break; /* the section was already reported */
	}
	return !p->failed;
}

/* Read PATH whole. Returns 0 or -errno; *BUF is NUL-terminated. */
static int read_file(const char *path, char **buf, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;

	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	if (S_ISDIR(st.st_mode)) {
		close(fd);
		return -EISDIR;
	}
	size_t cap = 4096, n = 0;
	char *b = malloc(cap + 1);
	if (!b) {
		close(fd);
		return -ENOMEM;
	}
	for (;;) {
		if (n == cap) {
			if (cap >= CONF_FILE_MAX) {
				free(b);
				close(fd);
				return -EFBIG;
			}
			cap *= 2;
			char *nb = realloc(b, cap + 1);
			if (!nb) {
				free(b);
				close(fd);
				return -ENOMEM;
			}
			b = nb;
		}
		ssize_t r = read(fd, b + n, cap - n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = -errno;
			free(b);
			close(fd);
			return e;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	b[n] = '\0';
	*buf = b;
	*len = n;
	return 0;
}

int config_load_lines(const char *path, struct config *c, char *err, size_t errlen,
		      config_warn_fn *warn, void *arg, struct config_lines **lines)
{
	struct config_parse *p;
	char *buf = NULL;
	size_t len = 0;
	int rc;

	config_set_defaults(c);
	if (err && errlen)
		err[0] = '\0';
	if (strlen(path) >= sizeof(c->path)) {
		snprintf(err, errlen, "%.64s...: cannot read: %s", path, strerror(ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	snprintf(c->path, sizeof(c->path), "%s", path);

	rc = read_file(path, &buf, &len);
	if (rc < 0) {
		snprintf(err, errlen, "%s: cannot read: %s", path, strerror(-rc));
		return rc;
	}
	/* The parse state holds a line-sized buffer: keep it off the stack. */
	struct config_lines *keep = calloc(1, sizeof(*keep));
	p = keep ? &keep->p : NULL;
	if (!p) {
		free(buf);
		snprintf(err, errlen, "%s: cannot read: %s", path, strerror(ENOMEM));
		return -ENOMEM;
	}
	p->c = c;
	p->buf = buf;
	p->len = len;
	p->at_line_start = true;
	p->err = err;
	p->errlen = errlen;

	/* One logical line per reader call: no multi-line values (an indented
	 * "key = value" is an ordinary key), lines up to CONF_LINE_MAX on the
	 * heap, stop at the first error (the one we report). */
	ini_allow_multiline = false;
	ini_use_stack = false;
	ini_allow_realloc = true;
	ini_max_line = CONF_LINE_MAX + 3;
	ini_stop_on_first_error = true;
	ini_allow_no_value = false;
	ini_allow_inline_comments = true;

	rc = ini_parse_stream(reader, p, handler, p);
	if (!p->failed && rc != 0) {
		if (rc == -2)
			snprintf(err, errlen, "%s: cannot read: %s", path, strerror(ENOMEM));
		else
			/* Parsing stopped at the bad line: the reader's count is it. */
			config_line_error(p, p->line,
					  "syntax error: expected '[section]', 'key = value' or a "
					  "comment");
		p->failed = true;
	}
	if (!p->failed)
		config_finish_tiers(p);
	if (!p->failed)
		config_finish_mount(p);
	if (!p->failed)
		config_finish_policy(p);
	if (!p->failed)
		config_finish_rules(p);

	/* Warnings only for a file that loads: a bad one gets its error alone. */
	if (!p->failed && warn)
		config_warn_moved(p, warn, arg);
	rc = p->failed ? -EINVAL : 0;
	free(buf);
	p->buf = NULL;
	p->err = NULL;
	p->errlen = 0;
	if (!rc && lines)
		*lines = keep;
	else
		free(keep);
	return rc;
}

int config_load_warn(const char *path, struct config *c, char *err, size_t errlen,
		     config_warn_fn *warn, void *arg)
{
	return config_load_lines(path, c, err, errlen, warn, arg, NULL);
}

void config_lines_free(struct config_lines *lines)
{
	free(lines);
}

static void warn_stderr(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "tierfs: %s\n", msg);
}

int config_load(const char *path, struct config *c, char *err, size_t errlen)
{
	return config_load_warn(path, c, err, errlen, warn_stderr, NULL);
}
