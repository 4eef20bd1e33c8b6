/*
 * tiers/sigv4.c — AWS Signature Version 4 (see sigv4.h): canonical request,
 * string to sign, signing key and Authorization value, on OpenSSL's EVP
 * SHA-256 and HMAC. Pure functions: everything goes into caller buffers.
 */
#include "tiers/sigv4.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#define SIGV4_MAX_HEADERS 32
#define SIGV4_MAX_QUERY	  16
#define SIGV4_QUERY_BUF	  4096

/* Appending into a fixed buffer; a write past its end marks it full. */
struct sb {
	char *p;
	size_t len, cap;
	bool full;
};

static void sb_putn(struct sb *b, const char *s, size_t n)
{
	if (b->full || b->len + n + 1 > b->cap) {
		b->full = true;
		return;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void sb_put(struct sb *b, const char *s)
{
	sb_putn(b, s, strlen(s));
}

static void sb_putc(struct sb *b, char c)
{
	sb_putn(b, &c, 1);
}

static bool unreserved(unsigned char c)
{
	return isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

int sigv4_uri_encode(const char *src, int keep_slash, char *out, size_t outlen)
{
	static const char hex[] = "0123456789ABCDEF";
	struct sb b = {out, 0, outlen, outlen == 0};
	if (outlen)
		out[0] = '\0';
	for (const unsigned char *s = (const unsigned char *)src; *s; s++) {
		if (unreserved(*s) || (keep_slash && *s == '/')) {
			sb_putc(&b, (char)*s);
		} else {
			char e[3] = {'%', hex[*s >> 4], hex[*s & 15]};
			sb_putn(&b, e, 3);
		}
	}
	return b.full ? -ENOSPC : (int)b.len;
}

void sigv4_amz_date(time_t t, char out[17])
{
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

static void to_hex(const unsigned char *d, size_t n, char *hex)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		hex[2 * i] = digits[d[i] >> 4];
		hex[2 * i + 1] = digits[d[i] & 15];
	}
	hex[2 * n] = '\0';
}

int sigv4_sha256_hex(const void *buf, size_t len, char hex[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	if (!EVP_Digest(buf, len, md, &mdlen, EVP_sha256(), NULL) || mdlen != 32)
		return -EIO;
	to_hex(md, 32, hex);
	return 0;
}

static int hmac(const void *key, size_t keylen, const char *msg, unsigned char out[32])
{
	unsigned int n = 0;
	if (!HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)msg, strlen(msg), out,
		  &n) ||
	    n != 32)
		return -EIO;
	return 0;
}

/* A header as signed: lowercase name, value trimmed with inner runs of
 * spaces collapsed to one. */
struct hdr {
	char name[64];
	const char *value;
};

static int hdr_cmp(const void *a, const void *b)
{
	return strcmp(((const struct hdr *)a)->name, ((const struct hdr *)b)->name);
}

static void put_trimmed(struct sb *b, const char *v)
{
	while (*v == ' ' || *v == '\t')
		v++;
	bool space = false;
	for (; *v; v++) {
		if (*v == ' ' || *v == '\t') {
			space = true;
			continue;
		}
		if (space)
			sb_putc(b, ' ');
		space = false;
		sb_putc(b, *v);
	}
}

struct qp {
	const char *name, *value; /* encoded, in the caller's scratch buffer */
};

static int qp_cmp(const void *a, const void *b)
{
	const struct qp *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : strcmp(x->value, y->value);
}

/* Sorted, lowercased headers of R into H; returns how many, or -errno. */
static int sorted_headers(const struct sigv4_request *r, struct hdr *h)
{
	if (r->nheaders > SIGV4_MAX_HEADERS)
		return -EINVAL;
	for (size_t i = 0; i < r->nheaders; i++) {
		size_t n = strlen(r->headers[i].name);
		if (!n || n >= sizeof(h[i].name))
			return -EINVAL;
		for (size_t k = 0; k <= n; k++)
			h[i].name[k] = (char)tolower((unsigned char)r->headers[i].name[k]);
		h[i].value = r->headers[i].value;
	}
	qsort(h, r->nheaders, sizeof(*h), hdr_cmp);
	return (int)r->nheaders;
}

static void put_signed_headers(struct sb *b, const struct hdr *h, int n)
{
	for (int i = 0; i < n; i++) {
		if (i && !strcmp(h[i].name, h[i - 1].name))
			continue;
		if (i)
			sb_putc(b, ';');
		sb_put(b, h[i].name);
	}
}

int sigv4_canonical_request(const struct sigv4_request *r, char *out, size_t outlen)
{
	struct sb b = {out, 0, outlen, outlen == 0};
	struct hdr h[SIGV4_MAX_HEADERS];
	int nh = sorted_headers(r, h);
	if (nh < 0)
		return nh;
	if (r->nquery > SIGV4_MAX_QUERY)
		return -EINVAL;

	sb_put(&b, r->method);
	sb_putc(&b, '\n');
	/* The path, encoded once (S3 does not normalize nor double-encode). */
	char *enc = b.full ? NULL : out + b.len;
	int n = enc ? sigv4_uri_encode(r->path && r->path[0] ? r->path : "/", 1, enc, b.cap - b.len)
		    : -ENOSPC;
	if (n < 0)
		return -ENOSPC;
	b.len += (size_t)n;
	sb_putc(&b, '\n');

	char qbuf[SIGV4_QUERY_BUF];
	struct qp q[SIGV4_MAX_QUERY];
	size_t used = 0;
	for (size_t i = 0; i < r->nquery; i++) {
		const char *parts[2] = {r->query[i].name,
					r->query[i].value ? r->query[i].value : ""};
		for (int k = 0; k < 2; k++) {
			int m = sigv4_uri_encode(parts[k], 0, qbuf + used, sizeof(qbuf) - used);
			if (m < 0)
				return -ENOSPC;
			if (k == 0)
				q[i].name = qbuf + used;
			else
				q[i].value = qbuf + used;
			used += (size_t)m + 1;
		}
	}
	qsort(q, r->nquery, sizeof(*q), qp_cmp);
	for (size_t i = 0; i < r->nquery; i++) {
		if (i)
			sb_putc(&b, '&');
		sb_put(&b, q[i].name);
		sb_putc(&b, '=');
		sb_put(&b, q[i].value);
	}
	sb_putc(&b, '\n');

	/* Canonical headers; a name given twice joins its values with ','
	 * in the order given (qsort is not stable, but callers sign each
	 * name once; the published vectors pass joined values). */
	for (int i = 0; i < nh; i++) {
		if (i && !strcmp(h[i].name, h[i - 1].name)) {
			b.len--; /* drop the '\n' */
			sb_putc(&b, ',');
		} else {
			sb_put(&b, h[i].name);
			sb_putc(&b, ':');
		}
		put_trimmed(&b, h[i].value ? h[i].value : "");
		sb_putc(&b, '\n');
	}
	sb_putc(&b, '\n');
	put_signed_headers(&b, h, nh);
	sb_putc(&b, '\n');
	sb_put(&b, r->payload_hash ? r->payload_hash : SIGV4_EMPTY_SHA256);
	return b.full ? -ENOSPC : (int)b.len;
}

static void put_scope(struct sb *b, const struct sigv4_creds *c, const char *amz_date)
{
	sb_putn(b, amz_date, 8);
	sb_putc(b, '/');
	sb_put(b, c->region);
	sb_putc(b, '/');
	sb_put(b, c->service);
	sb_put(b, "/aws4_request");
}

int sigv4_string_to_sign(const struct sigv4_creds *c, const char *amz_date, const char *creq,
			 char *out, size_t outlen)
{
	if (strlen(amz_date) != 16)
		return -EINVAL;
	char hash[65];
	int rc = sigv4_sha256_hex(creq, strlen(creq), hash);
	if (rc)
		return rc;
	struct sb b = {out, 0, outlen, outlen == 0};
	sb_put(&b, "AWS4-HMAC-SHA256\n");
	sb_put(&b, amz_date);
	sb_putc(&b, '\n');
	put_scope(&b, c, amz_date);
	sb_putc(&b, '\n');
	sb_put(&b, hash);
	return b.full ? -ENOSPC : (int)b.len;
}

int sigv4_authorization(const struct sigv4_creds *c, const char *amz_date,
			const struct sigv4_request *r, char *out, size_t outlen)
{
	char creq[8192], sts[512];
	int rc = sigv4_canonical_request(r, creq, sizeof(creq));
	if (rc < 0)
		return rc;
	if ((rc = sigv4_string_to_sign(c, amz_date, creq, sts, sizeof(sts))) < 0)
		return rc;

	/* kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region),
	 * service), "aws4_request"). */
	char k0[256];
	if (snprintf(k0, sizeof(k0), "AWS4%s", c->secret_key) >= (int)sizeof(k0))
		return -EINVAL;
	char date[9];
	memcpy(date, amz_date, 8);
	date[8] = '\0';
	unsigned char k1[32], k2[32], k3[32], k4[32], sig[32];
	rc = hmac(k0, strlen(k0), date, k1);
	if (!rc)
		rc = hmac(k1, 32, c->region, k2);
	if (!rc)
		rc = hmac(k2, 32, c->service, k3);
	if (!rc)
		rc = hmac(k3, 32, "aws4_request", k4);
	if (!rc)
		rc = hmac(k4, 32, sts, sig);
	/* The secret and keys derived from it do not outlive the call. */
	OPENSSL_cleanse(k0, sizeof(k0));
	OPENSSL_cleanse(k1, sizeof(k1));
	OPENSSL_cleanse(k2, sizeof(k2));
	OPENSSL_cleanse(k3, sizeof(k3));
	OPENSSL_cleanse(k4, sizeof(k4));
	if (rc)
		return rc;
	char sighex[65];
	to_hex(sig, 32, sighex);

	struct hdr h[SIGV4_MAX_HEADERS];
	int nh = sorted_headers(r, h);
	if (nh < 0)
		return nh;
	struct sb b = {out, 0, outlen, outlen == 0};
	sb_put(&b, "AWS4-HMAC-SHA256 Credential=");
	sb_put(&b, c->access_key);
	sb_putc(&b, '/');
	put_scope(&b, c, amz_date);
	sb_put(&b, ", SignedHeaders=");
	put_signed_headers(&b, h, nh);
	sb_put(&b, ", Signature=");
	sb_put(&b, sighex);
	return b.full ? -ENOSPC : (int)b.len;
}
