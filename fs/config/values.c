/*
 * fs/config/values.c — the syntax of config values: sizes (K/M/G/T, powers
 * of 1024, fractions allowed), bandwidths (SIZE/s), booleans, plain
 * integers, and seconds. Range checks belong to each key (keys.c).
 */
#include "fs/config/config_load.h"
#include "fs/config/parse_state.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

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
int config_parse_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
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
int config_parse_seconds_ms(const char *s, uint64_t *ms)
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
