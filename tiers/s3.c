/*
 * tiers/s3.c — the s3 tier: blocks as objects in an S3 bucket (AWS S3,
 * Ceph RGW, MinIO, SeaweedFS...), one object per slot under the tier's
 * prefix. This file opens and closes the tier: credentials (the
 * environment, or a shared credentials file and profile), the endpoint,
 * and the checks that make a mount fail with a message saying which
 * (endpoint unreachable, bucket missing, credentials refused, clock skew)
 * rather than fail every block later. s3_int.h maps the other files.
 *
 * Credentials live in struct s3_tier only: no log line, stats line or
 * error message prints them.
 */
#include "tiers/s3_int.h"

#include <errno.h>
#include <ini.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <openssl/crypto.h>

/* AWS refuses requests signed more than 15 minutes off its clock. */
#define S3_MAX_SKEW_S (15 * 60)

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct creds_parse {
	struct s3_tier *s;
	const char *profile;
	bool found;
};

static int creds_line(void *arg, const char *section, const char *name, const char *value)
{
	struct creds_parse *cp = arg;
	struct s3_tier *s = cp->s;
	if (strcmp(section, cp->profile))
		return 1;
	cp->found = true;
	if (!strcmp(name, "aws_access_key_id"))
		snprintf(s->access_key, sizeof(s->access_key), "%s", value);
	else if (!strcmp(name, "aws_secret_access_key"))
		snprintf(s->secret_key, sizeof(s->secret_key), "%s", value);
	else if (!strcmp(name, "aws_session_token"))
		snprintf(s->token, sizeof(s->token), "%s", value);
	return 1;
}

static int load_credentials(struct s3_tier *s)
{
	struct tier *t = s->t;
	if (!s->p.credentials_file[0]) {
		const char *ak = getenv("AWS_ACCESS_KEY_ID"), *sk = getenv("AWS_SECRET_ACCESS_KEY");
		const char *tok = getenv("AWS_SESSION_TOKEN");
		if (!ak || !ak[0] || !sk || !sk[0]) {
			tier_log(
			    t, "no credentials: set AWS_ACCESS_KEY_ID and "
			       "AWS_SECRET_ACCESS_KEY, or credentials_file in the tier's section");
			return -EACCES;
		}
		if (strlen(ak) >= sizeof(s->access_key) || strlen(sk) >= sizeof(s->secret_key) ||
		    (tok && strlen(tok) >= sizeof(s->token))) {
			tier_log(t, "credentials in the environment are too long");
			return -EINVAL;
		}
		snprintf(s->access_key, sizeof(s->access_key), "%s", ak);
		snprintf(s->secret_key, sizeof(s->secret_key), "%s", sk);
		snprintf(s->token, sizeof(s->token), "%s", tok ? tok : "");
		return 0;
	}
	char path[PATH_MAX];
	const char *f = s->p.credentials_file;
	if (f[0] == '~' && f[1] == '/') {
		const char *home = getenv("HOME");
		snprintf(path, sizeof(path), "%s%s", home ? home : "", f + 1);
	} else {
		snprintf(path, sizeof(path), "%s", f);
	}
	struct stat st;
	if (stat(path, &st)) {
		tier_log(t, "credentials_file %s: %s", path, strerror(errno));
		return -errno;
	}
	if (st.st_mode & 077)
		tier_log(t,
			 "warning: credentials_file %s is readable by group or others (mode %03o); "
			 "chmod 600 it",
			 path, (unsigned)(st.st_mode & 0777));
	const char *profile = s->p.profile[0] ? s->p.profile : "default";
	struct creds_parse cp = {s, profile, false};
	int rc = ini_parse(path, creds_line, &cp);
	if (rc) {
		tier_log(t, "credentials_file %s: %s", path,
			 rc < 0 ? "cannot read it" : "not in the AWS credentials format");
		return -EINVAL;
	}
	if (!cp.found || !s->access_key[0] || !s->secret_key[0]) {
		tier_log(t,
			 "credentials_file %s: profile [%s] has no aws_access_key_id and "
			 "aws_secret_access_key",
			 path, profile);
		return -EACCES;
	}
	return 0;
}

static int parse_endpoint(struct s3_tier *s)
{
	const char *e = s->p.endpoint;
	const char *rest;
	if (!strncmp(e, "https://", 8)) {
		s->https = true;
		rest = e + 8;
	} else if (!strncmp(e, "http://", 7)) {
		rest = e + 7;
	} else {
		tier_log(s->t, "endpoint %s: must start with http:// or https://", e);
		return -EINVAL;
	}
	size_t n = strcspn(rest, "/");
	if (!n || n >= 400 || strspn(rest + n, "/") != strlen(rest + n)) {
		tier_log(s->t, "endpoint %s: expected scheme://host[:port]", e);
		return -EINVAL;
	}
	char hostport[400];
	memcpy(hostport, rest, n);
	hostport[n] = '\0';
	if (s->p.virtual_host) {
		snprintf(s->host, sizeof(s->host), "%s.%s", s->p.bucket, hostport);
	} else {
		snprintf(s->host, sizeof(s->host), "%s", hostport);
	}
	snprintf(s->base, sizeof(s->base), "%s://%s", s->https ? "https" : "http", s->host);
	return 0;
}

/* LIST one key of the prefix: reaches the endpoint, the bucket and the
 * credentials at once; the answer's Date header says how far off our clock
 * is. */
static int check_store(struct s3_tier *s, CURL *easy)
{
	struct tier *t = s->t;
	struct s3_req *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->easy = easy;
	r->method = S3_GET;
	r->query[0] = (struct sigv4_pair){"list-type", "2"};
	r->query[1] = (struct sigv4_pair){"max-keys", "1"};
	r->query[2] = (struct sigv4_pair){"prefix", s->p.prefix};
	r->nquery = 3;
	/* A busy store may answer 503 or SlowDown for a moment: try again a
	 * few times; an endpoint that does not answer fails at once. */
	enum s3_class c;
	for (int i = 0;; i++) {
		c = s3_req_run(s, r, false);
		if ((c != S3_RETRY_5XX && c != S3_RETRY_THROTTLE) || i == 3)
			break;
		struct timespec ts = {0, 200000000L << i};
		nanosleep(&ts, NULL);
	}
	char code[64];
	s3_error_code(r, code, sizeof(code));
	int rc = 0;
	long skew = r->server_date ? (long)time(NULL) - r->server_date : 0;
	if (r->curl_rc == CURLE_PEER_FAILED_VERIFICATION ||
	    r->curl_rc == CURLE_SSL_CACERT_BADFILE || r->curl_rc == CURLE_SSL_CONNECT_ERROR) {
		tier_log(t,
			 "TLS with %s failed: %s (ca_file names another CA; tls_verify = no "
			 "skips the check)",
			 s->p.endpoint,
			 r->curl_err[0] ? r->curl_err : curl_easy_strerror(r->curl_rc));
		rc = -EPROTO;
	} else if (c == S3_RETRY_NET || (c == S3_FAIL_OTHER && r->curl_rc != CURLE_OK)) {
		tier_log(t, "endpoint %s unreachable: %s", s->p.endpoint,
			 r->curl_err[0] ? r->curl_err : curl_easy_strerror((CURLcode)r->curl_rc));
		/* The caller's last line prints this errno: the connect's own
		 * (refused, timed out...) says what happened, where a fixed
		 * EHOSTUNREACH said "No route to host" for a port nobody
		 * listens on. */
		long os_errno = 0;
		curl_easy_getinfo(easy, CURLINFO_OS_ERRNO, &os_errno);
		if (os_errno > 0 && os_errno < 4096)
			rc = -(int)os_errno;
		else if (r->curl_rc == CURLE_OPERATION_TIMEDOUT)
			rc = -ETIMEDOUT;
		else
			rc = -EHOSTUNREACH;
	} else if (!strcmp(code, "RequestTimeTooSkewed") || skew > S3_MAX_SKEW_S ||
		   skew < -S3_MAX_SKEW_S) {
		tier_log(t,
			 "clock skew: this host's clock is %ld s off the server's (HTTP %ld%s%s); "
			 "signed requests are refused beyond %d s: fix the clock (NTP)",
			 skew, r->status, code[0] ? " " : "", code, S3_MAX_SKEW_S);
		rc = -ETIME;
	} else if (r->status == 404 || !strcmp(code, "NoSuchBucket")) {
		tier_log(t, "bucket '%s' does not exist at %s (HTTP %ld%s%s)", s->p.bucket,
			 s->p.endpoint, r->status, code[0] ? " " : "", code);
		rc = -ENOENT;
	} else if (r->status == 401 || r->status == 403) {
		tier_log(t,
			 "credentials refused by %s for bucket '%s' (HTTP %ld %s): check the "
			 "access key, secret and region",
			 s->p.endpoint, s->p.bucket, r->status, code[0] ? code : "");
		rc = -EACCES;
	} else if (c != S3_OK) {
		tier_log(t, "listing bucket '%s' at %s failed: HTTP %ld %s", s->p.bucket,
			 s->p.endpoint, r->status, code[0] ? code : "(no S3 error code)");
		rc = -EIO;
	}
	s3_req_release(r);
	free(r);
	return rc;
}

static void s3_close(struct tier *t)
{
	struct s3_tier *s = t->be_priv;
	if (!s)
		return;
	s3_sweep_stop(s);
	s3_io_stop(s);
	s3_lease_release(s);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->lease_lock);
	pthread_cond_destroy(&s->lease_cond);
	OPENSSL_cleanse(s->secret_key, sizeof(s->secret_key));
	OPENSSL_cleanse(s->token, sizeof(s->token));
	free(s);
	t->be_priv = NULL;
}

static int s3_open(struct tier *t, const struct tier_params *p)
{
	if (!p->s3 || !p->s3->endpoint[0] || !p->s3->bucket[0]) {
		tier_log(t, "an s3 tier needs an endpoint and a bucket");
		return -EINVAL;
	}
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK) {
		tier_log(t, "libcurl: %s", curl_easy_strerror(curl_init_rc));
		return -EIO;
	}
	struct s3_tier *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->t = t;
	s->p = *p->s3;
	if (!s->p.region[0])
		snprintf(s->p.region, sizeof(s->p.region), "us-east-1");
	if (!s->p.retries)
		s->p.retries = 1;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->lease_lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->lease_cond, &ca);
	pthread_condattr_destroy(&ca);
	t->be_priv = s;

	int rc = parse_endpoint(s);
	if (!rc)
		rc = load_credentials(s);
	if (!rc) {
		CURL *easy = curl_easy_init();
		if (!easy) {
			rc = -ENOMEM;
		} else {
			rc = check_store(s, easy);
			curl_easy_cleanup(easy);
		}
	}
	if (!rc)
		rc = s3_lease_take(s);
	if (!rc && (rc = s3_io_start(s)))
		tier_log(t, "cannot start the I/O thread: %s", strerror(-rc));
	if (rc) {
		s3_close(t);
		return rc;
	}
	return 0;
}

static int s3_sync(struct tier *t)
{
	/* An acknowledged PUT is durable on the store. */
	(void)t;
	return 0;
}

static void s3_mounted(struct tier *t)
{
	s3_sweep_start(t->be_priv);
}

/* The upper bound of the latency bucket holding the Q-th quantile. */
static uint64_t lat_quantile(const uint64_t *h, uint64_t n, double q)
{
	uint64_t want = (uint64_t)((double)n * q), seen = 0;
	for (unsigned b = 0; b < S3_LAT_BUCKETS; b++) {
		seen += h[b];
		if (seen > want)
			return 2ULL << b;
	}
	return 0;
}

static void s3_stats_extra(const struct tier *t, char *buf, size_t len)
{
	const struct s3_tier *s = t->be_priv;
	uint64_t h[S3_LAT_BUCKETS], n = 0;
	for (unsigned b = 0; b < S3_LAT_BUCKETS; b++) {
		h[b] = __atomic_load_n(&s->st.lat[b], __ATOMIC_RELAXED);
		n += h[b];
	}
	snprintf(buf, len,
		 " requests=%" PRIu64 " retries=%" PRIu64 " errors_4xx=%" PRIu64
		 " errors_5xx=%" PRIu64 " throttled=%" PRIu64 " network_errors=%" PRIu64
		 " latency_p50_us=%" PRIu64 " latency_p99_us=%" PRIu64,
		 __atomic_load_n(&s->st.requests, __ATOMIC_RELAXED),
		 __atomic_load_n(&s->st.retries, __ATOMIC_RELAXED),
		 __atomic_load_n(&s->st.err_4xx, __ATOMIC_RELAXED),
		 __atomic_load_n(&s->st.err_5xx, __ATOMIC_RELAXED),
		 __atomic_load_n(&s->st.throttled, __ATOMIC_RELAXED),
		 __atomic_load_n(&s->st.network, __ATOMIC_RELAXED),
		 n ? lat_quantile(h, n, 0.50) : 0, n ? lat_quantile(h, n, 0.99) : 0);
}

const struct tier_backend tier_s3_backend = {
    .kind_name = "s3",
    .open = s3_open,
    .close = s3_close,
    .submit = s3_io_submit,
    .sync = s3_sync,
    .prepare_slot = s3_io_prepare_slot,
    .free_slot = s3_io_free_slot,
    .mounted = s3_mounted,
    .stats_extra = s3_stats_extra,
    .set_max_bandwidth = s3_io_set_max_bandwidth,
};
