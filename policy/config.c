/*
 * policy/config.c — load and validate the tierfs INI config (see config.h).
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
 * Paths must be absolute: the daemon may chdir("/") when it detaches, and
 * fstab mounts run from an unknown directory.
 *
 * Not thread-safe: config_load() sets inih's process-wide options. It is
 * called once, at startup, before any thread exists.
 */
#include "policy/config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define KIB 1024ULL
#define MIB (1024ULL * KIB)
#define GIB (1024ULL * MIB)

/* Longest line we accept: a PATH_MAX value plus its key. */
#define CONF_LINE_MAX (PATH_MAX + 256)
/* Longest config file we read: configs are a few KiB. */
#define CONF_FILE_MAX (4 * MIB)

#define RAM_DEFAULT_CAPACITY (256 * MIB)
#define META_DIRNAME	     ".tierfs-meta"

/* ---- value parsers ---------------------------------------------------- */

/* Parse a size prefix of S: digits[.digits] [spaces] [K|M|G|T][i][B].
 * *END is set past what was consumed (the caller decides what may follow). */
static int parse_size_prefix(const char *s, uint64_t *out, const char **end)
{
	const char *p = s;
	unsigned __int128 ipart = 0, fnum = 0, fden = 1;
	int fdigits = 0;

	if (!isdigit((unsigned char)*p))
		return -EINVAL; /* empty, negative, '+', '.5' */
	while (isdigit((unsigned char)*p)) {
		ipart = ipart * 10 + (unsigned)(*p - '0');
		if (ipart > UINT64_MAX)
			return -EINVAL;
		p++;
	}
	if (*p == '.') {
		p++;
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		while (isdigit((unsigned char)*p)) {
			/* Beyond 18 digits the fraction cannot change a whole
			 * number of bytes of anything below 2^64. */
			if (fdigits < 18) {
				fnum = fnum * 10 + (unsigned)(*p - '0');
				fden *= 10;
				fdigits++;
			}
			p++;
		}
	}
	while (*p == ' ' || *p == '\t')
		p++;

	uint64_t mult = 1;
	switch (toupper((unsigned char)*p)) {
	case 'K':
		mult = KIB;
		break;
	case 'M':
		mult = MIB;
		break;
	case 'G':
		mult = GIB;
		break;
	case 'T':
		mult = 1024 * GIB;
		break;
	default:
		break;
	}
	if (mult != 1) {
		p++;
		if (*p == 'i' || *p == 'I') {
			if (toupper((unsigned char)p[1]) != 'B')
				return -EINVAL;
			p += 2;
		} else if (*p == 'b' || *p == 'B') {
			p++;
		}
	} else if (*p == 'b' || *p == 'B') {
		p++;
	}
	/* "1.5" bytes means nothing; "1.5K" is 1536. */
	if (fdigits && mult == 1)
		return -EINVAL;

	unsigned __int128 v = ipart * mult + fnum * mult / fden;
	if (v > UINT64_MAX)
		return -EINVAL;
	*out = (uint64_t)v;
	*end = p;
	return 0;
}

int config_parse_size(const char *s, uint64_t *out)
{
	const char *end;
	uint64_t v;

	if (!s || parse_size_prefix(s, &v, &end) < 0 || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

int config_parse_bandwidth(const char *s, uint64_t *out)
{
	const char *end;
	uint64_t v;

	if (!s || parse_size_prefix(s, &v, &end) < 0)
		return -EINVAL;
	while (*end == ' ' || *end == '\t')
		end++;
	if (end[0] != '/' || (end[1] != 's' && end[1] != 'S') || end[2])
		return -EINVAL;
	*out = v;
	return 0;
}

int config_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = {"yes", "true", "on", "1"};
	static const char *const no[] = {"no", "false", "off", "0"};

	if (!s)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!strcasecmp(s, yes[i])) {
			*out = true;
			return 0;
		}
		if (!strcasecmp(s, no[i])) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

/* Plain decimal integer in [lo, hi]; no sign, no suffix. */
static int parse_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	uint64_t v = 0;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	for (; *s; s++) {
		if (!isdigit((unsigned char)*s))
			return -EINVAL;
		if (v > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		v = v * 10 + (unsigned)(*s - '0');
	}
	if (v < lo || v > hi)
		return -ERANGE;
	*out = v;
	return 0;
}

/* Seconds, possibly fractional ("0.5", "2", "1.25s"), into milliseconds. */
static int parse_seconds_ms(const char *s, uint64_t *ms)
{
	uint64_t ip = 0, frac_ms = 0;
	int fd = 0;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	while (isdigit((unsigned char)*s)) {
		if (ip > 1000000)
			return -ERANGE;
		ip = ip * 10 + (unsigned)(*s++ - '0');
	}
	if (*s == '.') {
		s++;
		if (!isdigit((unsigned char)*s))
			return -EINVAL;
		/* Only milliseconds matter; further digits must still be digits. */
		while (isdigit((unsigned char)*s)) {
			if (fd < 3) {
				frac_ms = frac_ms * 10 + (unsigned)(*s - '0');
				fd++;
			}
			s++;
		}
		while (fd < 3) {
			frac_ms *= 10;
			fd++;
		}
	}
	if (*s == 's')
		s++;
	if (*s)
		return -EINVAL;
	*ms = ip * 1000 + frac_ms;
	return 0;
}

/* ---- parse state ------------------------------------------------------ */

enum sect_kind { S_NONE, S_MOUNT, S_TIER, S_POLICY, S_RULE, S_UNKNOWN };

enum mount_key {
	MK_BLOCK_SIZE,
	MK_METADATA,
	MK_SYNC,
	MK_ALLOW_OTHER,
	MK_THREADS,
	MK_DIRTY,
	MK_FLUSH,
	MK_COMMIT,
	MK_WB_TIMEOUT,
	MK_N
};
static const char *const mount_keys[MK_N] = {
    "block_size",  "metadata",	     "sync_on_close",	"allow_other",	    "threads",
    "dirty_ratio", "flush_interval", "commit_interval", "writeback_timeout"};

enum tier_key {
	TK_TYPE,
	TK_PATH,
	TK_CAPACITY,
	TK_PERSISTENT,
	TK_WEIGHT,
	TK_DIRECT,
	TK_QD,
	TK_SLAB,
	TK_BW,
	TK_BW_READ,
	TK_BW_WRITE,
	TK_MAX_BW,
	TK_MAX_BW_READ,
	TK_MAX_BW_WRITE,
	TK_N
};
static const char *const tier_keys[TK_N] = {"type",
					    "path",
					    "capacity",
					    "persistent",
					    "weight",
					    "direct",
					    "queue_depth",
					    "slab_size",
					    "bandwidth",
					    "bandwidth_read",
					    "bandwidth_write",
					    "max_bandwidth",
					    "max_bandwidth_read",
					    "max_bandwidth_write"};

enum policy_key { PK_STRIPE, PK_LEARN, PK_PREFETCH, PK_MAX_CYCLE, PK_KEEP_PLAN, PK_GAP_PLAN, PK_N };
static const char *const policy_keys[PK_N] = {"stripe",		 "learn",     "prefetch_depth",
					      "learn_max_cycle", "keep_plan", "gap_plan"};

enum rule_key { RK_MATCH, RK_TIER, RK_PERSISTENT, RK_N };
static const char *const rule_keys[RK_N] = {"match", "tier", "persistent"};

struct tier_extra {
	int kline[TK_N]; /* line of each key, 0 = not given */
	bool bw_auto;	 /* bandwidth = auto */
	uint64_t bw, bw_read, bw_write;
	uint64_t max_bw, max_bw_read, max_bw_write; /* 0 = none */
	dev_t dev; /* posix: identity of the directory, to catch duplicates */
	ino_t ino;
};

struct rule_extra {
	int kline[RK_N];
	char tier[TIER_NAME_MAX + 1]; /* resolved after parsing: tiers may follow */
};

struct parse {
	struct config *c;
	const char *buf;
	size_t len, pos;
	bool at_line_start;
	int line; /* line of the text last handed to inih */

	enum sect_kind sect;
	char sect_name[2 * CONF_NAME_MAX + 8]; /* for messages: "tier nvme0" */
	int sect_line;
	int idx; /* current tier or rule */

	int mount_line, policy_line;
	int mkline[MK_N];
	int pkline[PK_N];
	char stripe[CONF_LINE_MAX];
	struct tier_extra tx[CONF_MAX_TIERS];
	struct rule_extra rx[CONF_MAX_RULES];

	char *err;
	size_t errlen;
	bool failed;
};

static void __attribute__((format(printf, 4, 5)))
key_error(struct parse *p, int line, const char *key, const char *fmt, ...)
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

static void __attribute__((format(printf, 4, 5)))
sect_error(struct parse *p, int line, const char *sect, const char *fmt, ...)
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

static void __attribute__((format(printf, 3, 4)))
line_error(struct parse *p, int line, const char *fmt, ...)
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

static int key_index(const char *const *keys, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcasecmp(keys[i], name))
			return i;
	return -1;
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

static void section_begin(struct parse *p, char *name)
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
	if (!strcmp(name, "mount") || !strcmp(name, "policy")) {
		bool mount = name[0] == 'm';
		snprintf(p->sect_name, sizeof(p->sect_name), "%.*s", CONF_NAME_MAX, name);
		if (*arg) {
			sect_error(p, p->line, name, "takes no name (found '%s')", arg);
			return;
		}
		int *seen = mount ? &p->mount_line : &p->policy_line;
		if (*seen) {
			sect_error(p, p->line, name, "given twice (first on line %d)", *seen);
			return;
		}
		*seen = p->line;
		p->sect = mount ? S_MOUNT : S_POLICY;
		return;
	}
	if (!strcmp(name, "tier")) {
		snprintf(p->sect_name, sizeof(p->sect_name), "tier %.*s", CONF_NAME_MAX - 1, arg);
		if (!valid_name(arg, TIER_NAME_MAX - 1, false)) {
			sect_error(p, p->line, p->sect_name,
				   "tier name must be 1-%d characters of A-Z a-z 0-9 _ -",
				   TIER_NAME_MAX - 1);
			return;
		}
		int dup = config_tier_index(c, arg);
		if (dup >= 0) {
			sect_error(p, p->line, p->sect_name,
				   "duplicate tier name '%s' (first on line %d)", arg,
				   c->tiers[dup].line);
			return;
		}
		if (c->ntiers >= CONF_MAX_TIERS) {
			sect_error(p, p->line, p->sect_name, "too many tiers (at most %d)",
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
			sect_error(p, p->line, p->sect_name,
				   "rule name must be 1-%d characters of A-Z a-z 0-9 _ - .",
				   CONF_NAME_MAX - 1);
			return;
		}
		for (int i = 0; i < c->nrules; i++) {
			if (!strcmp(c->rules[i].name, arg)) {
				sect_error(p, p->line, p->sect_name,
					   "duplicate rule name '%s' (first on line %d)", arg,
					   c->rules[i].line);
				return;
			}
		}
		if (c->nrules >= CONF_MAX_RULES) {
			sect_error(p, p->line, p->sect_name, "too many rules (at most %d)",
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
	sect_error(p, p->line, p->sect_name,
		   "unknown section (expected [mount], [tier NAME], [policy] or [rule NAME])");
	p->sect = S_UNKNOWN;
}

/* ---- the inih reader: hands out lines, counts them, sees sections ---- */

/* If LINE (LEN bytes, no newline) is a "[name]" header the way inih sees
 * one, start that section. */
static void maybe_section(struct parse *p, const char *line, size_t len)
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
	struct parse *p = stream;

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
			line_error(p, p->line, "line too long (more than %d characters)",
				   CONF_LINE_MAX - 2);
			return NULL;
		}
		if (memchr(start, '\0', len)) {
			line_error(p, p->line, "contains a NUL byte");
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

/* ---- keys ------------------------------------------------------------ */

/* Common checks; returns the key id or -1 (error already recorded). */
static int key_begin(struct parse *p, const char *const *keys, int nkeys, int *klines,
		     const char *name)
{
	int k = key_index(keys, nkeys, name);

	if (k < 0) {
		key_error(p, p->line, name, "unknown key in section [%s]", p->sect_name);
		return -1;
	}
	if (klines[k]) {
		key_error(p, p->line, name, "given twice in section [%s] (first on line %d)",
			  p->sect_name, klines[k]);
		return -1;
	}
	klines[k] = p->line;
	return k;
}

static int check_abs_path(struct parse *p, const char *key, const char *v)
{
	if (v[0] != '/') {
		key_error(p, p->line, key, "'%s' must be an absolute path", v);
		return -1;
	}
	if (strlen(v) >= PATH_MAX - sizeof(META_DIRNAME) - 1) {
		key_error(p, p->line, key, "path too long");
		return -1;
	}
	return 0;
}

/* Copy V into DST without trailing slashes ("/a/b/" -> "/a/b", "/" stays). */
static void copy_path(char *dst, const char *v)
{
	size_t n = strlen(v);

	while (n > 1 && v[n - 1] == '/')
		n--;
	memcpy(dst, v, n);
	dst[n] = '\0';
}

/* A period in seconds (flush_interval, commit_interval, writeback_timeout)
 * into *MS. */
static void interval_key(struct parse *p, const char *name, const char *v, unsigned *ms)
{
	uint64_t x;
	if (parse_seconds_ms(v, &x) < 0 || x == 0 || x > 3600 * 1000)
		key_error(p, p->line, name,
			  "'%s' must be seconds, more than 0 and at most 3600 "
			  "(fractions down to 0.001 allowed)",
			  v);
	else
		*ms = (unsigned)x;
}

static void mount_key(struct parse *p, const char *name, const char *v)
{
	struct config *c = p->c;
	uint64_t x;
	int k = key_begin(p, mount_keys, MK_N, p->mkline, name);

	switch (k) {
	case MK_BLOCK_SIZE:
		if (config_parse_size(v, &x) < 0)
			key_error(p, p->line, name, "'%s' is not a size (e.g. 1M, 64K)", v);
		else if (x < 4 * KIB || x > 64 * MIB || (x & (x - 1)))
			key_error(p, p->line, name, "'%s' must be a power of two from 4K to 64M",
				  v);
		else
			c->block_size = (uint32_t)x;
		break;
	case MK_METADATA:
		if (check_abs_path(p, name, v) == 0)
			copy_path(c->metadata, v);
		break;
	case MK_SYNC:
	case MK_ALLOW_OTHER:
		if (config_parse_bool(v, k == MK_SYNC ? &c->sync_on_close : &c->allow_other) < 0)
			key_error(p, p->line, name, "'%s' is not yes or no", v);
		break;
	case MK_THREADS:
		if (parse_uint(v, 1, 256, &x) < 0)
			key_error(p, p->line, name, "'%s' must be an integer from 1 to 256", v);
		else
			c->threads = (unsigned)x;
		break;
	case MK_DIRTY:
		if (parse_uint(v, 1, 100, &x) < 0)
			key_error(p, p->line, name, "'%s' must be a percentage from 1 to 100", v);
		else
			c->dirty_ratio = (unsigned)x;
		break;
	case MK_FLUSH:
		interval_key(p, name, v, &c->flush_interval_ms);
		break;
	case MK_COMMIT:
		interval_key(p, name, v, &c->commit_interval_ms);
		break;
	case MK_WB_TIMEOUT:
		interval_key(p, name, v, &c->writeback_timeout_ms);
		break;
	default:
		break;
	}
}

static void tier_key(struct parse *p, const char *name, const char *v)
{
	struct conf_tier *t = &p->c->tiers[p->idx];
	struct tier_extra *tx = &p->tx[p->idx];
	uint64_t x;
	bool b;
	int k = key_begin(p, tier_keys, TK_N, tx->kline, name);

	switch (k) {
	case TK_TYPE:
		if (!strcmp(v, "ram"))
			t->kind = TIER_RAM;
		else if (!strcmp(v, "posix"))
			t->kind = TIER_POSIX;
		else if (!strcmp(v, "s3"))
			key_error(p, p->line, name, "tier type 's3' is not supported yet");
		else
			key_error(p, p->line, name, "'%s' is not a tier type (ram or posix)", v);
		break;
	case TK_PATH: {
		struct stat st;
		if (check_abs_path(p, name, v) < 0)
			break;
		if (stat(v, &st) < 0) {
			key_error(p, p->line, name, "%s: %s", v, strerror(errno));
			break;
		}
		if (!S_ISDIR(st.st_mode)) {
			key_error(p, p->line, name, "%s: %s", v, strerror(ENOTDIR));
			break;
		}
		copy_path(t->path, v);
		tx->dev = st.st_dev;
		tx->ino = st.st_ino;
		break;
	}
	case TK_CAPACITY:
		if (config_parse_size(v, &x) < 0)
			key_error(p, p->line, name, "'%s' is not a size (e.g. 8G, 512M)", v);
		else if (x == 0)
			key_error(p, p->line, name, "must be greater than zero");
		else
			t->capacity = x;
		break;
	case TK_PERSISTENT:
		if (config_parse_bool(v, &t->persistent) < 0)
			key_error(p, p->line, name, "'%s' is not yes or no", v);
		break;
	case TK_WEIGHT:
		if (parse_uint(v, 1, UINT32_MAX, &x) < 0)
			key_error(p, p->line, name, "'%s' must be an integer of at least 1", v);
		else {
			t->weight = x;
			t->weight_set = true;
		}
		break;
	case TK_DIRECT:
		if (!strcasecmp(v, "auto"))
			t->direct = -1;
		else if (config_parse_bool(v, &b) == 0)
			t->direct = b;
		else
			key_error(p, p->line, name, "'%s' must be auto, yes or no", v);
		break;
	case TK_QD:
		if (parse_uint(v, 1, 1024, &x) < 0)
			key_error(p, p->line, name, "'%s' must be an integer from 1 to 1024", v);
		else
			t->queue_depth = (unsigned)x;
		break;
	case TK_SLAB:
		if (config_parse_size(v, &x) < 0 || x == 0)
			key_error(p, p->line, name, "'%s' is not a size (e.g. 1G)", v);
		else
			t->slab_size = x;
		break;
	case TK_BW:
	case TK_BW_READ:
	case TK_BW_WRITE: {
		uint64_t *dst = k == TK_BW	  ? &tx->bw
				: k == TK_BW_READ ? &tx->bw_read
						  : &tx->bw_write;
		if (!strcasecmp(v, "auto")) {
			*dst = 0; /* measured at mount */
			if (k == TK_BW)
				tx->bw_auto = true;
		} else if (config_parse_bandwidth(v, &x) < 0) {
			key_error(p, p->line, name, "'%s' is not auto or a bandwidth (e.g. 2G/s)",
				  v);
		} else if (x == 0) {
			key_error(p, p->line, name, "must be greater than zero (or auto)");
		} else {
			*dst = x;
		}
		break;
	}
	case TK_MAX_BW:
	case TK_MAX_BW_READ:
	case TK_MAX_BW_WRITE: {
		uint64_t *dst = k == TK_MAX_BW	      ? &tx->max_bw
				: k == TK_MAX_BW_READ ? &tx->max_bw_read
						      : &tx->max_bw_write;
		if (!strcasecmp(v, "none"))
			*dst = 0;
		else if (config_parse_bandwidth(v, &x) < 0)
			key_error(p, p->line, name, "'%s' is not none or a bandwidth (e.g. 2G/s)",
				  v);
		else if (x == 0)
			key_error(p, p->line, name, "must be greater than zero (or none)");
		else
			*dst = x;
		break;
	}
	default:
		break;
	}
}

static void policy_key(struct parse *p, const char *name, const char *v)
{
	struct config *c = p->c;
	uint64_t x;
	int k = key_begin(p, policy_keys, PK_N, p->pkline, name);

	switch (k) {
	case PK_STRIPE:
		/* Resolved after parsing: the tiers may be defined below. */
		snprintf(p->stripe, sizeof(p->stripe), "%s", v);
		break;
	case PK_LEARN:
		if (config_parse_bool(v, &c->learn) < 0)
			key_error(p, p->line, name, "'%s' is not yes or no", v);
		break;
	case PK_PREFETCH:
		if (parse_uint(v, 0, 65536, &x) < 0)
			key_error(p, p->line, name, "'%s' must be an integer from 0 to 65536", v);
		else
			c->prefetch_depth = (unsigned)x;
		break;
	case PK_KEEP_PLAN:
		if (config_parse_bool(v, &c->keep_plan) < 0)
			key_error(p, p->line, name, "'%s' is not yes or no", v);
		break;
	case PK_GAP_PLAN:
		if (!strcasecmp(v, "auto")) {
			c->gap_plan = CONF_GAP_AUTO;
		} else {
			bool on;
			if (config_parse_bool(v, &on) < 0)
				key_error(p, p->line, name, "'%s' is not yes, no or auto", v);
			else
				c->gap_plan = on ? CONF_GAP_YES : CONF_GAP_NO;
		}
		break;
	case PK_MAX_CYCLE:
		if (!strcasecmp(v, "auto"))
			c->learn_max_cycle = 0;
		else if (parse_uint(v, 1024, 1u << 30, &x) < 0)
			key_error(p, p->line, name,
				  "'%s' must be auto or an integer from 1024 to 1073741824 "
				  "(block accesses)",
				  v);
		else
			c->learn_max_cycle = x;
		break;
	default:
		break;
	}
}

static void rule_key(struct parse *p, const char *name, const char *v)
{
	struct conf_rule *r = &p->c->rules[p->idx];
	struct rule_extra *rx = &p->rx[p->idx];
	int k = key_begin(p, rule_keys, RK_N, rx->kline, name);

	switch (k) {
	case RK_MATCH:
		if (!*v) {
			key_error(p, p->line, name, "empty pattern");
		} else if (strlen(v) >= sizeof(r->match)) {
			key_error(p, p->line, name, "pattern too long");
		} else if (strchr(v, '/') && v[0] != '/' && v[0] != '*') {
			/* A pattern with '/' is matched against the whole path,
			 * which always starts with '/': it could never match. */
			key_error(p, p->line, name,
				  "'%s' contains '/' so it is matched against the whole path "
				  "inside the mount, which starts with '/'",
				  v);
		} else {
			snprintf(r->match, sizeof(r->match), "%s", v);
		}
		break;
	case RK_TIER:
		if (strlen(v) >= sizeof(rx->tier))
			key_error(p, p->line, name, "rule '%s': no tier named '%s'", r->name, v);
		else
			snprintf(rx->tier, sizeof(rx->tier), "%s", v);
		break;
	case RK_PERSISTENT:
		if (config_parse_bool(v, &r->persistent) < 0)
			key_error(p, p->line, name, "'%s' is not yes or no", v);
		break;
	default:
		break;
	}
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
	struct parse *p = user;

	(void)section; /* ours, from the reader: it has the line and no length limit */
	if (p->failed)
		return 0;
	switch (p->sect) {
	case S_NONE:
		key_error(p, p->line, name,
			  "outside any section (start with [mount] or [tier NAME])");
		break;
	case S_MOUNT:
		mount_key(p, name, value);
		break;
	case S_TIER:
		tier_key(p, name, value);
		break;
	case S_POLICY:
		policy_key(p, name, value);
		break;
	case S_RULE:
		rule_key(p, name, value);
		break;
	case S_UNKNOWN:
		break; /* the section was already reported */
	}
	return !p->failed;
}

/* ---- after parsing: defaults and cross-checks ------------------------ */

static void finish_tiers(struct parse *p)
{
	struct config *c = p->c;
	int nram = 0;

	for (int i = 0; i < c->ntiers && !p->failed; i++) {
		struct conf_tier *t = &c->tiers[i];
		struct tier_extra *tx = &p->tx[i];
		char sect[CONF_NAME_MAX + 8];

		snprintf(sect, sizeof(sect), "tier %s", t->name);
		if (!tx->kline[TK_TYPE]) {
			sect_error(p, t->line, sect, "missing required key 'type' (ram or posix)");
			return;
		}
		if (!tx->kline[TK_PERSISTENT])
			t->persistent = t->kind == TIER_POSIX;
		/* A specific direction overrides "bandwidth", in either order. */
		t->bandwidth_read = tx->kline[TK_BW_READ] ? tx->bw_read : tx->bw;
		t->bandwidth_write = tx->kline[TK_BW_WRITE] ? tx->bw_write : tx->bw;
		t->max_bandwidth_read = tx->kline[TK_MAX_BW_READ] ? tx->max_bw_read : tx->max_bw;
		t->max_bandwidth_write = tx->kline[TK_MAX_BW_WRITE] ? tx->max_bw_write : tx->max_bw;

		if (t->kind == TIER_RAM) {
			static const int posix_only[] = {TK_PATH, TK_DIRECT, TK_SLAB};
			if (++nram > 1) {
				sect_error(p, t->line, sect, "only one ram tier is supported");
				return;
			}
			for (size_t k = 0; k < sizeof(posix_only) / sizeof(posix_only[0]); k++) {
				int key = posix_only[k];
				if (tx->kline[key]) {
					key_error(
					    p, tx->kline[key], tier_keys[key],
					    "only posix tiers have a %s; tier '%s' is a ram tier",
					    tier_keys[key], t->name);
					return;
				}
			}
			if (!tx->kline[TK_CAPACITY]) {
				sect_error(p, t->line, sect,
					   "missing required key 'capacity' (a ram tier needs one, "
					   "e.g. capacity = 8G)");
				return;
			}
			if (t->persistent) {
				key_error(p, tx->kline[TK_PERSISTENT], "persistent",
					  "a ram tier cannot be persistent");
				return;
			}
			c->ram_tier = i;
		} else {
			if (!tx->kline[TK_PATH]) {
				sect_error(
				    p, t->line, sect,
				    "missing required key 'path' (the directory for this tier)");
				return;
			}
			/* Nothing would ever go there: blocks leave RAM only for
			 * a durable home. Scratch files are a rule's business. */
			if (!t->persistent) {
				key_error(
				    p, tx->kline[TK_PERSISTENT], "persistent",
				    "a posix tier is always persistent; for files that need "
				    "not outlive the mount, use a [rule] with persistent = no");
				return;
			}
			for (int j = 0; j < i; j++) {
				if (c->tiers[j].kind == TIER_POSIX && p->tx[j].dev == tx->dev &&
				    p->tx[j].ino == tx->ino) {
					key_error(p, tx->kline[TK_PATH], "path",
						  "%s is the same directory as tier '%s' (line %d)",
						  t->path, c->tiers[j].name,
						  p->tx[j].kline[TK_PATH]);
					return;
				}
			}
			if (!tx->kline[TK_CAPACITY]) {
				struct statvfs vfs;
				if (statvfs(t->path, &vfs) < 0) {
					key_error(p, tx->kline[TK_PATH], "path", "%s: statvfs: %s",
						  t->path, strerror(errno));
					return;
				}
				/* Slabs are preallocated: free space alone would
				 * shrink by the tier's own data at every mount,
				 * until slots in use fall beyond the capacity. */
				uint64_t held;
				int rc = tier_posix_held(t->path, &held);
				if (rc) {
					key_error(p, tx->kline[TK_PATH], "path",
						  "%s: cannot size the tier's slab files: %s",
						  t->path, strerror(-rc));
					return;
				}
				t->capacity = (uint64_t)vfs.f_bavail * vfs.f_frsize + held;
			}
			if (t->slab_size % c->block_size) {
				key_error(p, tx->kline[TK_SLAB], "slab_size",
					  "%llu bytes is not a multiple of block_size (%u)",
					  (unsigned long long)t->slab_size, c->block_size);
				return;
			}
		}
		if (t->capacity < c->block_size) {
			if (tx->kline[TK_CAPACITY])
				key_error(p, tx->kline[TK_CAPACITY], "capacity",
					  "%llu bytes is less than one block (block_size %u)",
					  (unsigned long long)t->capacity, c->block_size);
			else
				key_error(p, tx->kline[TK_PATH], "path",
					  "%s has less than one block (%u bytes) free; "
					  "set capacity",
					  t->path, c->block_size);
			return;
		}
	}
	if (p->failed)
		return;

	if (nram == 0) {
		/* The cache is not optional: synthesize a small one. */
		if (c->ntiers >= CONF_MAX_TIERS) {
			struct conf_tier *last = &c->tiers[c->ntiers - 1];
			char sect[CONF_NAME_MAX + 8];
			snprintf(sect, sizeof(sect), "tier %s", last->name);
			sect_error(p, last->line, sect,
				   "too many tiers: at most %d besides the implicit ram tier "
				   "(or declare a [tier NAME] with type = ram)",
				   CONF_MAX_TIERS - 1);
			return;
		}
		static const char *const names[] = {"ram", "ram-cache", "tierfs-ram"};
		const char *name = NULL;
		for (size_t k = 0; k < sizeof(names) / sizeof(names[0]) && !name; k++)
			if (config_tier_index(c, names[k]) < 0)
				name = names[k];
		if (!name) {
			line_error(p, 1, "no name left for the implicit ram tier; declare one");
			return;
		}
		struct conf_tier *t = &c->tiers[c->ntiers];
		snprintf(t->name, sizeof(t->name), "%s", name);
		t->kind = TIER_RAM;
		t->capacity = RAM_DEFAULT_CAPACITY;
		t->persistent = false;
		t->implicit = true;
		t->line = 0;
		c->ram_tier = c->ntiers++;
		if (t->capacity < c->block_size)
			t->capacity = c->block_size;
	}
}

static void finish_mount(struct parse *p)
{
	struct config *c = p->c;

	if (c->metadata[0])
		return;
	int first = -1;
	for (int i = 0; i < c->ntiers && first < 0; i++)
		if (c->tiers[i].kind == TIER_POSIX)
			first = i;
	if (first < 0) {
		key_error(p, p->mount_line ? p->mount_line : 1, "metadata",
			  "required when no posix tier is configured");
		return;
	}
	snprintf(c->metadata, sizeof(c->metadata), "%s/%s",
		 strcmp(c->tiers[first].path, "/") ? c->tiers[first].path : "", META_DIRNAME);
}

static void finish_policy(struct parse *p)
{
	struct config *c = p->c;

	c->nstripe = 0;
	if (!p->pkline[PK_STRIPE]) {
		for (int i = 0; i < c->ntiers; i++)
			if (c->tiers[i].kind == TIER_POSIX)
				c->stripe[c->nstripe++] = i;
		return;
	}
	int line = p->pkline[PK_STRIPE];
	const char *sep = ", \t";
	char *save = NULL;
	for (char *tok = strtok_r(p->stripe, sep, &save); tok; tok = strtok_r(NULL, sep, &save)) {
		int i = config_tier_index(c, tok);
		if (i < 0) {
			key_error(p, line, "stripe", "no tier named '%s'", tok);
			return;
		}
		if (c->tiers[i].kind == TIER_RAM) {
			key_error(p, line, "stripe",
				  "tier '%s' is the ram tier (the cache); stripe over persistent "
				  "posix tiers",
				  tok);
			return;
		}
		for (int j = 0; j < c->nstripe; j++) {
			if (c->stripe[j] == i) {
				key_error(p, line, "stripe", "tier '%s' is listed twice", tok);
				return;
			}
		}
		c->stripe[c->nstripe++] = i;
	}
	if (c->nstripe == 0)
		key_error(p, line, "stripe", "empty (leave the key out for every persistent tier)");
}

static void finish_rules(struct parse *p)
{
	struct config *c = p->c;

	for (int i = 0; i < c->nrules && !p->failed; i++) {
		struct conf_rule *r = &c->rules[i];
		struct rule_extra *rx = &p->rx[i];
		char sect[CONF_NAME_MAX + 8];

		snprintf(sect, sizeof(sect), "rule %s", r->name);
		if (!rx->kline[RK_MATCH]) {
			sect_error(p, r->line, sect, "missing required key 'match' (a path glob)");
			return;
		}
		if (!rx->kline[RK_TIER]) {
			sect_error(p, r->line, sect, "missing required key 'tier'");
			return;
		}
		r->tier = config_tier_index(c, rx->tier);
		if (r->tier < 0) {
			key_error(p, rx->kline[RK_TIER], "tier", "rule '%s': no tier named '%s'",
				  r->name, rx->tier);
			return;
		}
	}
}

static void set_defaults(struct config *c)
{
	memset(c, 0, sizeof(*c));
	c->block_size = MIB;
	c->sync_on_close = false;
	c->allow_other = false;
	c->threads = 16;
	c->dirty_ratio = 25;
	c->flush_interval_ms = 1000;
	c->commit_interval_ms = 5000;
	c->writeback_timeout_ms = 5000;
	c->ram_tier = -1;
	c->learn = true;
	c->keep_plan = true;
	c->gap_plan = CONF_GAP_AUTO;
	c->prefetch_depth = 64;
	for (int i = 0; i < CONF_MAX_TIERS; i++) {
		struct conf_tier *t = &c->tiers[i];
		t->weight = 1;
		t->direct = -1;
		t->queue_depth = 8;
		/* 0: the tier keeps the slab size it was formatted with (a
		 * new one gets 1G), so the key can be left out once set. */
		t->slab_size = 0;
	}
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

int config_load(const char *path, struct config *c, char *err, size_t errlen)
{
	struct parse *p;
	char *buf = NULL;
	size_t len = 0;
	int rc;

	set_defaults(c);
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
	p = calloc(1, sizeof(*p));
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
			line_error(p, p->line,
				   "syntax error: expected '[section]', 'key = value' or a "
				   "comment");
		p->failed = true;
	}
	if (!p->failed)
		finish_tiers(p);
	if (!p->failed)
		finish_mount(p);
	if (!p->failed)
		finish_policy(p);
	if (!p->failed)
		finish_rules(p);

	rc = p->failed ? -EINVAL : 0;
	free(p);
	free(buf);
	return rc;
}

int config_tier_index(const struct config *c, const char *name)
{
	for (int i = 0; i < c->ntiers; i++)
		if (!strcmp(c->tiers[i].name, name))
			return i;
	return -1;
}
