/*
 * tiers/sigv4.h — AWS Signature Version 4 for the s3 tier, on OpenSSL's
 * SHA-256 and HMAC.
 *
 * Why our own signer: libcurl's built-in one (CURLOPT_AWS_SIGV4, in the
 * libcurl Debian ships) leaves out x-amz-content-sha256, which AWS S3
 * requires, and its signatures with the header set were refused by a real
 * server. SigV4 is small and fully specified, so it is done here, as pure
 * functions (no I/O, no clock, no allocation) that the unit tests check
 * against AWS's published vectors.
 *
 * The caller passes the request as it will go on the wire: method, the
 * path NOT yet encoded (encoded once here, '/' kept, as S3 wants), the
 * query as raw name/value pairs, every header to sign (host and x-amz-date
 * among them; x-amz-content-sha256 and x-amz-security-token too when sent)
 * and the payload hash (hex SHA-256 of the body, or "UNSIGNED-PAYLOAD").
 */
#ifndef TIERFS_SIGV4_H
#define TIERFS_SIGV4_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define SIGV4_UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"
#define SIGV4_EMPTY_SHA256     "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

struct sigv4_pair {
	const char *name;
	const char *value;
};

struct sigv4_request {
	const char *method; /* "GET", "PUT", ... */
	const char *path;   /* "/bucket/key", unencoded */
	const struct sigv4_pair *query;
	size_t nquery;
	const struct sigv4_pair *headers; /* any case, any order; values are trimmed */
	size_t nheaders;
	const char *payload_hash; /* 64 hex digits or SIGV4_UNSIGNED_PAYLOAD */
};

struct sigv4_creds {
	const char *access_key;
	const char *secret_key;
	const char *region;  /* "us-east-1" */
	const char *service; /* "s3" */
};

/* The canonical request (task 1 of the signing process) into OUT.
 * Returns its length, or -ENOSPC when OUT is too small, -EINVAL when a
 * header is empty-named or too many are given. */
int sigv4_canonical_request(const struct sigv4_request *r, char *out, size_t outlen);

/* The string to sign for AMZ_DATE ("YYYYMMDDTHHMMSSZ"). */
int sigv4_string_to_sign(const struct sigv4_creds *c, const char *amz_date, const char *creq,
			 char *out, size_t outlen);

/* The Authorization header's value for R signed at AMZ_DATE, which must be
 * the value R's x-amz-date header carries. Returns its length or -errno. */
int sigv4_authorization(const struct sigv4_creds *c, const char *amz_date,
			const struct sigv4_request *r, char *out, size_t outlen);

/* Lowercase hex SHA-256 of BUF into HEX (65 bytes). 0 or -EIO. */
int sigv4_sha256_hex(const void *buf, size_t len, char hex[65]);

/* "YYYYMMDDTHHMMSSZ" of T (UTC) into OUT (17 bytes). */
void sigv4_amz_date(time_t t, char out[17]);

/* SRC percent-encoded as SigV4 wants (RFC 3986 unreserved kept, '/' kept
 * when KEEP_SLASH). Returns the length, or -ENOSPC. */
int sigv4_uri_encode(const char *src, int keep_slash, char *out, size_t outlen);

#endif
