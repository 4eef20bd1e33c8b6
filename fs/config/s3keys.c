/*
 * fs/config/s3keys.c — the keys of an s3 tier ([tier NAME] with type = s3):
 * their names, defaults, what each accepts on its own line, and the checks
 * of the finished section (required keys, keys that belong to other kinds).
 * Kept apart from keys.c so the s3 tier's keys stay in one place.
 */
#include "fs/config/config_load.h"
#include "fs/config/parse_state.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

const char *const config_s3_keys[S3K_N] = {
    "endpoint",	  "bucket",	     "prefix",		"region",	"credentials_file",
    "profile",	  "tls_verify",	     "ca_file",		"addressing",	"retries",
    "retry_time", "request_timeout", "connect_timeout", "lease_timeout"};

void config_s3_defaults(struct tier_s3_params *s)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->region, sizeof(s->region), "us-east-1");
	snprintf(s->profile, sizeof(s->profile), "default");
	s->tls_verify = true;
	s->retries = 10;
	s->retry_time_ms = 120 * 1000;
	s->request_timeout_ms = 60 * 1000;
	s->connect_timeout_ms = 10 * 1000;
	s->lease_timeout_ms = 60 * 1000;
}

static void copy_str(struct config_parse *p, const char *name, const char *v, char *dst, size_t len)
{
	if (strlen(v) >= len)
		config_key_error(p, p->line, name, "longer than %zu characters", len - 1);
	else
		snprintf(dst, len, "%s", v);
}

static void seconds_key(struct config_parse *p, const char *name, const char *v, unsigned lo_ms,
			unsigned *ms)
{
	uint64_t x;
	if (config_parse_seconds_ms(v, &x) < 0 || x < lo_ms || x > 24 * 3600 * 1000)
		config_key_error(p, p->line, name,
				 "'%s' must be seconds, at least %g and at most 86400", v,
				 lo_ms / 1000.0);
	else
		*ms = (unsigned)x;
}

bool config_key_s3(struct config_parse *p, const char *name, const char *v)
{
	int k = config_key_index(config_s3_keys, S3K_N, name);
	if (k < 0)
		return false;
	struct config_tier_extra *tx = &p->tx[p->idx];
	struct tier_s3_params *s = &p->c->tiers[p->idx].s3;
	if (tx->s3kline[k]) {
		config_key_error(p, p->line, name, "given twice in section [%s] (first on line %d)",
				 p->sect_name, tx->s3kline[k]);
		return true;
	}
	tx->s3kline[k] = p->line;
	uint64_t x;
	switch (k) {
	case S3K_ENDPOINT:
		if (strncmp(v, "http://", 7) && strncmp(v, "https://", 8))
			config_key_error(p, p->line, name,
					 "'%s' must be http://HOST[:PORT] or https://HOST[:PORT]",
					 v);
		else
			copy_str(p, name, v, s->endpoint, sizeof(s->endpoint));
		break;
	case S3K_BUCKET:
		if (strlen(v) < 3 || strlen(v) > 63 ||
		    strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789.-") != strlen(v))
			config_key_error(p, p->line, name,
					 "'%s' is not a bucket name (3 to 63 lowercase letters, "
					 "digits, '.' or '-')",
					 v);
		else
			copy_str(p, name, v, s->bucket, sizeof(s->bucket));
		break;
	case S3K_PREFIX:
		if (v[0] == '/')
			config_key_error(p, p->line, name,
					 "'%s' must not start with '/' (keys are relative to the "
					 "bucket)",
					 v);
		else
			copy_str(p, name, v, s->prefix, sizeof(s->prefix));
		break;
	case S3K_REGION:
		if (!v[0])
			config_key_error(p, p->line, name, "must not be empty");
		else
			copy_str(p, name, v, s->region, sizeof(s->region));
		break;
	case S3K_CREDS:
		if (v[0] != '/' && strncmp(v, "~/", 2))
			config_key_error(p, p->line, name,
					 "'%s' must be an absolute path (or start with ~/)", v);
		else
			copy_str(p, name, v, s->credentials_file, sizeof(s->credentials_file));
		break;
	case S3K_PROFILE:
		if (!v[0])
			config_key_error(p, p->line, name, "must not be empty");
		else
			copy_str(p, name, v, s->profile, sizeof(s->profile));
		break;
	case S3K_TLS_VERIFY:
		if (config_parse_bool(v, &s->tls_verify) < 0)
			config_key_error(p, p->line, name, "'%s' is not yes or no", v);
		break;
	case S3K_CA_FILE:
		if (v[0] != '/')
			config_key_error(p, p->line, name, "'%s' must be an absolute path", v);
		else
			copy_str(p, name, v, s->ca_file, sizeof(s->ca_file));
		break;
	case S3K_ADDRESSING:
		if (!strcasecmp(v, "path"))
			s->virtual_host = false;
		else if (!strcasecmp(v, "virtual"))
			s->virtual_host = true;
		else
			config_key_error(p, p->line, name, "'%s' must be path or virtual", v);
		break;
	case S3K_RETRIES:
		if (config_parse_uint(v, 1, 100, &x) < 0)
			config_key_error(p, p->line, name, "'%s' must be an integer from 1 to 100",
					 v);
		else
			s->retries = (unsigned)x;
		break;
	case S3K_RETRY_TIME:
		seconds_key(p, name, v, 1, &s->retry_time_ms);
		break;
	case S3K_REQ_TIMEOUT:
		seconds_key(p, name, v, 100, &s->request_timeout_ms);
		break;
	case S3K_CONN_TIMEOUT:
		seconds_key(p, name, v, 100, &s->connect_timeout_ms);
		break;
	case S3K_LEASE_TIMEOUT:
		seconds_key(p, name, v, 4000, &s->lease_timeout_ms);
		break;
	default:
		break;
	}
	return true;
}

void config_finish_s3(struct config_parse *p, int i)
{
	struct conf_tier *t = &p->c->tiers[i];
	struct config_tier_extra *tx = &p->tx[i];
	char sect[CONF_NAME_MAX + 8];
	snprintf(sect, sizeof(sect), "tier %s", t->name);
	if (t->kind != TIER_S3) {
		for (int k = 0; k < S3K_N; k++)
			if (tx->s3kline[k]) {
				config_key_error(p, tx->s3kline[k], config_s3_keys[k],
						 "only s3 tiers have a %s; tier '%s' is a %s tier",
						 config_s3_keys[k], t->name,
						 t->kind == TIER_RAM ? "ram" : "posix");
				return;
			}
		return;
	}
	static const int posix_only[] = {TK_PATH, TK_DIRECT, TK_SLAB};
	for (size_t k = 0; k < sizeof(posix_only) / sizeof(posix_only[0]); k++)
		if (tx->kline[posix_only[k]]) {
			config_key_error(p, tx->kline[posix_only[k]],
					 config_tier_keys[posix_only[k]],
					 "only posix tiers have a %s; tier '%s' is an s3 tier",
					 config_tier_keys[posix_only[k]], t->name);
			return;
		}
	if (!tx->s3kline[S3K_ENDPOINT]) {
		config_sect_error(p, t->line, sect,
				  "missing required key 'endpoint' (e.g. "
				  "endpoint = http://127.0.0.1:8333)");
		return;
	}
	if (!tx->s3kline[S3K_BUCKET]) {
		config_sect_error(p, t->line, sect, "missing required key 'bucket'");
		return;
	}
	/* A bucket has no free space to measure: a default that costs little
	 * (the slot map is a bit per block) and holds a large model's state. */
	if (!tx->kline[TK_CAPACITY])
		t->capacity = 1ULL << 40;
	if (!t->persistent) {
		config_key_error(p, tx->kline[TK_PERSISTENT], "persistent",
				 "an s3 tier is always persistent; for files that need "
				 "not outlive the mount, use a [rule] with persistent = no");
		return;
	}
	if (t->s3.lease_timeout_ms < 4000)
		t->s3.lease_timeout_ms = 4000;
	for (int j = 0; j < i; j++) {
		const struct conf_tier *o = &p->c->tiers[j];
		if (o->kind == TIER_S3 && !strcmp(o->s3.endpoint, t->s3.endpoint) &&
		    !strcmp(o->s3.bucket, t->s3.bucket) && !strcmp(o->s3.prefix, t->s3.prefix)) {
			config_key_error(p, tx->s3kline[S3K_BUCKET], "bucket",
					 "tier '%s' (line %d) uses the same endpoint, bucket and "
					 "prefix",
					 o->name, o->line);
			return;
		}
	}
}
