/*
 * tiers/s3_http.c — one S3 request of the s3 tier: its object key and URL,
 * the SigV4 headers (signed again at every attempt, so a retry carries a
 * fresh x-amz-date), the libcurl easy handle's setup, and the verdict on
 * each attempt (done, retry after back-off, fail) with the counters the
 * stats line shows. Both the data path (s3_io.c, libcurl multi) and the
 * blocking requests of open, the lease and the sweep go through here.
 */
#include "tiers/s3_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* Back-off: full jitter over an exponential window from BASE, capped. */
#define S3_BACKOFF_BASE_NS (50ULL * 1000000)
#define S3_BACKOFF_CAP_NS  (5ULL * 1000000000)
/* An error body worth keeping is short; a listing is not. */
#define S3_ERR_BODY_MAX (16u << 10)

static unsigned slot_spread(uint64_t slot)
{
	return (unsigned)(tier_checksum(&slot, sizeof(slot)) & 0xff);
}

void s3_object_key(const struct s3_tier *s, uint64_t slot, char *key, size_t len)
{
	snprintf(key, len, "%s%02x/%016" PRIx64, s->p.prefix, slot_spread(slot), slot);
}

bool s3_parse_key(const struct s3_tier *s, const char *key, uint64_t *slot)
{
	size_t pl = strlen(s->p.prefix);
	if (strncmp(key, s->p.prefix, pl))
		return false;
	key += pl;
	if (strlen(key) != 2 + 1 + 16 || key[2] != '/')
		return false;
	unsigned spread = 0;
	uint64_t v = 0;
	for (int i = 0; i < 19; i++) {
		if (i == 2)
			continue;
		char c = key[i];
		unsigned d;
		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else
			return false;
		if (i < 2)
			spread = spread * 16 + d;
		else
			v = v * 16 + d;
	}
	if (spread != slot_spread(v))
		return false;
	*slot = v;
	return true;
}

static size_t on_body(char *p, size_t sz, size_t n, void *arg)
{
	struct s3_req *r = arg;
	size_t len = sz * n;
	long code = 0;
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
	if (r->method == S3_GET && r->len && code >= 200 && code < 300) {
		/* A server that ignores the Range sends the whole object:
		 * keep what was asked for. */
		size_t take = r->got < r->len ? r->len - r->got : 0;
		if (take > len)
			take = len;
		memcpy(r->body + r->got, p, take);
		r->got += take;
		return len;
	}
	size_t max = r->resp_max ? r->resp_max : S3_ERR_BODY_MAX;
	size_t take = r->resp_len < max ? max - r->resp_len : 0;
	if (take > len)
		take = len;
	if (take && r->resp_len + take + 1 > r->resp_cap) {
		size_t cap = r->resp_cap ? r->resp_cap : 4096;
		while (cap < r->resp_len + take + 1)
			cap *= 2;
		char *nr = realloc(r->resp, cap);
		if (!nr)
			return 0; /* abort: out of memory */
		r->resp = nr;
		r->resp_cap = cap;
	}
	if (take) {
		memcpy(r->resp + r->resp_len, p, take);
		r->resp_len += take;
		r->resp[r->resp_len] = '\0';
	}
	return len;
}

static size_t on_header(char *p, size_t sz, size_t n, void *arg)
{
	struct s3_req *r = arg;
	size_t len = sz * n;
	if (len > 5 && !strncasecmp(p, "Date:", 5)) {
		char v[128];
		size_t l = len - 5 < sizeof(v) - 1 ? len - 5 : sizeof(v) - 1;
		memcpy(v, p + 5, l);
		v[l] = '\0';
		time_t d = curl_getdate(v, NULL);
		if (d > 0)
			r->server_date = (long)d;
	}
	return len;
}

static size_t on_read(char *p, size_t sz, size_t n, void *arg)
{
	struct s3_req *r = arg;
	size_t len = sz * n, left = r->len - r->sent;
	if (len > left)
		len = left;
	memcpy(p, r->body + r->sent, len);
	r->sent += len;
	return len;
}

static int on_seek(void *arg, curl_off_t off, int origin)
{
	struct s3_req *r = arg;
	if (origin != SEEK_SET || off < 0 || (size_t)off > r->len)
		return CURL_SEEKFUNC_CANTSEEK;
	r->sent = (size_t)off;
	return CURL_SEEKFUNC_OK;
}

static int add_header(struct s3_req *r, const char *name, const char *value)
{
	char line[4400];
	snprintf(line, sizeof(line), "%s: %s", name, value);
	struct curl_slist *l = curl_slist_append(r->hdrs, line);
	if (!l)
		return -ENOMEM;
	r->hdrs = l;
	return 0;
}

static const char *method_name(enum s3_method m)
{
	switch (m) {
	case S3_GET:
		return "GET";
	case S3_PUT:
		return "PUT";
	case S3_DELETE:
		return "DELETE";
	case S3_HEAD:
		return "HEAD";
	case S3_POST:
		return "POST";
	}
	return "GET";
}

void s3_req_release(struct s3_req *r)
{
	free(r->resp);
	r->resp = NULL;
	r->resp_len = r->resp_cap = 0;
	curl_slist_free_all(r->hdrs);
	r->hdrs = NULL;
}

int s3_req_setup(struct s3_tier *s, struct s3_req *r)
{
	/* The path as sent (and signed): /bucket/key path-style, /key
	 * virtual-hosted. */
	char path[1400], epath[4200], url[6000];
	if (s->p.virtual_host)
		snprintf(path, sizeof(path), "/%s", r->key);
	else
		snprintf(path, sizeof(path), "/%s%s%s", s->p.bucket, r->key[0] ? "/" : "", r->key);
	if (sigv4_uri_encode(path, 1, epath, sizeof(epath)) < 0)
		return -ENAMETOOLONG;
	int n = snprintf(url, sizeof(url), "%s%s", s->base, epath);
	for (size_t i = 0; i < r->nquery && n < (int)sizeof(url); i++) {
		char en[1100], ev[1100];
		if (sigv4_uri_encode(r->query[i].name, 0, en, sizeof(en)) < 0 ||
		    sigv4_uri_encode(r->query[i].value ? r->query[i].value : "", 0, ev,
				     sizeof(ev)) < 0)
			return -ENAMETOOLONG;
		n += snprintf(url + n, sizeof(url) - (size_t)n, "%c%s=%s", i ? '&' : '?', en, ev);
	}
	if (n >= (int)sizeof(url))
		return -ENAMETOOLONG;

	char date[17], range[64];
	sigv4_amz_date(time(NULL), date);
	const char *payload = SIGV4_EMPTY_SHA256;
	if (r->method == S3_PUT || r->method == S3_POST)
		payload = r->payload[0] ? r->payload : SIGV4_UNSIGNED_PAYLOAD;
	struct sigv4_pair h[8];
	size_t nh = 0;
	h[nh++] = (struct sigv4_pair){"host", s->host};
	h[nh++] = (struct sigv4_pair){"x-amz-content-sha256", payload};
	h[nh++] = (struct sigv4_pair){"x-amz-date", date};
	if (r->method == S3_GET && r->range) {
		snprintf(range, sizeof(range), "bytes=0-%zu", r->len - 1);
		h[nh++] = (struct sigv4_pair){"range", range};
	}
	if (s->token[0])
		h[nh++] = (struct sigv4_pair){"x-amz-security-token", s->token};
	if (r->method == S3_POST) {
		h[nh++] = (struct sigv4_pair){"content-md5", r->md5};
		h[nh++] = (struct sigv4_pair){"content-type", "application/xml"};
	}
	struct sigv4_creds c = {s->access_key, s->secret_key, s->p.region, "s3"};
	struct sigv4_request sr = {
	    .method = method_name(r->method),
	    .path = path,
	    .query = r->query,
	    .nquery = r->nquery,
	    .headers = h,
	    .nheaders = nh,
	    .payload_hash = payload,
	};
	char auth[1024];
	int rc = sigv4_authorization(&c, date, &sr, auth, sizeof(auth));
	if (rc < 0)
		return rc;

	curl_slist_free_all(r->hdrs);
	r->hdrs = NULL;
	for (size_t i = 0; i < nh; i++)
		if ((rc = add_header(r, h[i].name, h[i].value)))
			return rc;
	if ((rc = add_header(r, "Authorization", auth)))
		return rc;
	/* Without it libcurl waits up to a second for 100-continue before
	 * each PUT body. */
	struct curl_slist *l = curl_slist_append(r->hdrs, "Expect:");
	if (!l)
		return -ENOMEM;
	r->hdrs = l;

	r->got = r->sent = 0;
	r->resp_len = 0;
	if (r->resp)
		r->resp[0] = '\0';
	r->status = 0;
	r->curl_err[0] = '\0';
	r->server_date = 0;
	CURL *e = r->easy;
	curl_easy_reset(e);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)s->p.connect_timeout_ms);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)s->p.request_timeout_ms);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, s->p.tls_verify ? 1L : 0L);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, s->p.tls_verify ? 2L : 0L);
	if (s->p.ca_file[0])
		curl_easy_setopt(e, CURLOPT_CAINFO, s->p.ca_file);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->curl_err);
	curl_easy_setopt(e, CURLOPT_PRIVATE, r);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 256L * 1024);
	switch (r->method) {
	case S3_PUT:
		curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, 1024L * 1024);
		curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(e, CURLOPT_READDATA, r);
		curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, on_seek);
		curl_easy_setopt(e, CURLOPT_SEEKDATA, r);
		curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->len);
		break;
	case S3_DELETE:
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE");
		break;
	case S3_HEAD:
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
		break;
	case S3_POST:
		curl_easy_setopt(e, CURLOPT_POST, 1L);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->len);
		break;
	case S3_GET:
		break;
	}
	r->start_ns = tier_now_ns();
	if (!r->attempts)
		r->first_ns = r->start_ns;
	r->attempts++;
	return 0;
}

void s3_error_code(const struct s3_req *r, char *code, size_t len)
{
	code[0] = '\0';
	const char *b = r->resp ? strstr(r->resp, "<Code>") : NULL;
	if (!b)
		return;
	b += 6;
	const char *e = strstr(b, "</Code>");
	if (!e)
		return;
	size_t n = (size_t)(e - b);
	if (n >= len)
		n = len - 1;
	memcpy(code, b, n);
	code[n] = '\0';
}

void s3_stats_add(struct s3_tier *s, uint64_t lat_ns)
{
	uint64_t us = lat_ns / 1000;
	unsigned b = 0;
	while (us > 1 && b < S3_LAT_BUCKETS - 1) {
		us >>= 1;
		b++;
	}
	__atomic_add_fetch(&s->st.requests, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&s->st.lat[b], 1, __ATOMIC_RELAXED);
}

enum s3_class s3_req_finish(struct s3_tier *s, struct s3_req *r, CURLcode rc)
{
	r->curl_rc = (int)rc;
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->status);
	s3_stats_add(s, tier_now_ns() - r->start_ns);
	enum s3_class c;
	if (rc != CURLE_OK) {
		switch (rc) {
		case CURLE_COULDNT_CONNECT:
		case CURLE_COULDNT_RESOLVE_HOST:
		case CURLE_OPERATION_TIMEDOUT:
		case CURLE_SEND_ERROR:
		case CURLE_RECV_ERROR:
		case CURLE_GOT_NOTHING:
		case CURLE_PARTIAL_FILE:
		case CURLE_SEND_FAIL_REWIND:
		case CURLE_SSL_CONNECT_ERROR:
		case CURLE_HTTP2:
		case CURLE_HTTP2_STREAM:
			c = S3_RETRY_NET;
			break;
		default:
			c = S3_FAIL_OTHER;
			break;
		}
	} else if (r->status >= 200 && r->status < 300) {
		c = S3_OK;
		if (r->method == S3_GET && r->len && r->got < r->len)
			c = S3_FAIL_OTHER; /* the object is shorter than the block written */
	} else {
		char code[64];
		s3_error_code(r, code, sizeof(code));
		if (r->status == 429 || !strcmp(code, "SlowDown") || !strcmp(code, "Throttling"))
			c = S3_RETRY_THROTTLE;
		else if (r->status >= 500)
			c = S3_RETRY_5XX;
		else if (r->status == 408 || !strcmp(code, "RequestTimeout"))
			c = S3_RETRY_NET;
		else if ((r->method == S3_DELETE || r->missing_ok) && r->status == 404)
			c = S3_OK; /* already gone, or asked whether it is there */
		else
			c = S3_FAIL_4XX;
	}
	switch (c) {
	case S3_RETRY_5XX:
		__atomic_add_fetch(&s->st.err_5xx, 1, __ATOMIC_RELAXED);
		break;
	case S3_RETRY_THROTTLE:
		__atomic_add_fetch(&s->st.throttled, 1, __ATOMIC_RELAXED);
		break;
	case S3_RETRY_NET:
		__atomic_add_fetch(&s->st.network, 1, __ATOMIC_RELAXED);
		break;
	case S3_FAIL_4XX:
		__atomic_add_fetch(&s->st.err_4xx, 1, __ATOMIC_RELAXED);
		break;
	default:
		break;
	}
	return c;
}

static uint64_t jitter_rand(void)
{
	static __thread uint64_t x;
	if (!x)
		x = tier_now_ns() ^ (uint64_t)(uintptr_t)&x ^ 0x9e3779b97f4a7c15ULL;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return x;
}

uint64_t s3_retry_delay(const struct s3_tier *s, const struct s3_req *r)
{
	if (r->attempts >= s->p.retries)
		return 0;
	uint64_t window = S3_BACKOFF_BASE_NS << (r->attempts < 20 ? r->attempts - 1 : 20);
	if (window > S3_BACKOFF_CAP_NS)
		window = S3_BACKOFF_CAP_NS;
	uint64_t d = jitter_rand() % window + 1;
	uint64_t spent = tier_now_ns() - r->first_ns;
	if (spent + d > (uint64_t)s->p.retry_time_ms * 1000000)
		return 0;
	return d;
}

void s3_req_describe(const struct s3_req *r, char *buf, size_t len)
{
	char code[64];
	s3_error_code(r, code, sizeof(code));
	if (r->curl_rc != CURLE_OK)
		snprintf(buf, len, "%s %s: %s (after %u attempts)", method_name(r->method), r->key,
			 r->curl_err[0] ? r->curl_err : curl_easy_strerror((CURLcode)r->curl_rc),
			 r->attempts);
	else if (r->status >= 200 && r->status < 300)
		snprintf(buf, len, "%s %s: object holds %zu bytes, %zu expected",
			 method_name(r->method), r->key, r->got, r->len);
	else
		snprintf(buf, len, "%s %s: HTTP %ld %s (after %u attempts)", method_name(r->method),
			 r->key, r->status, code[0] ? code : "(no S3 error code)", r->attempts);
}

enum s3_class s3_req_run(struct s3_tier *s, struct s3_req *r, bool retry)
{
	r->attempts = 0;
	for (;;) {
		if (s3_req_setup(s, r)) {
			r->curl_rc = CURLE_OUT_OF_MEMORY;
			snprintf(r->curl_err, sizeof(r->curl_err), "cannot build the request");
			return S3_FAIL_OTHER;
		}
		CURLcode rc = curl_easy_perform(r->easy);
		enum s3_class c = s3_req_finish(s, r, rc);
		if (c == S3_OK || c == S3_FAIL_4XX || c == S3_FAIL_OTHER || !retry)
			return c;
		uint64_t d = s3_retry_delay(s, r);
		if (!d)
			return c;
		__atomic_add_fetch(&s->st.retries, 1, __ATOMIC_RELAXED);
		struct timespec ts = {(time_t)(d / 1000000000), (long)(d % 1000000000)};
		nanosleep(&ts, NULL);
	}
}
