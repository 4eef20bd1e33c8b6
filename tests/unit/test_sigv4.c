/*
 * tests/unit/test_sigv4.c — the SigV4 signer against AWS's published
 * vectors: the Signature Version 4 test suite (service "service", 2015-08-30
 * 12:36:00 UTC, key AKIDEXAMPLE) and the examples of the S3 documentation
 * (GET object with a Range, PUT object with its payload hash, GET with a
 * valueless query parameter, a listing with two parameters).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tiers/sigv4.h"

#define SUITE_DATE "20150830T123600Z"
#define SUITE_HOST "example.amazonaws.com"

static const struct sigv4_creds suite = {
    .access_key = "AKIDEXAMPLE",
    .secret_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
    .region = "us-east-1",
    .service = "service",
};

static const struct sigv4_creds s3doc = {
    .access_key = "AKIAIOSFODNN7EXAMPLE",
    .secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    .region = "us-east-1",
    .service = "s3",
};

#define S3_DATE "20130524T000000Z"
#define S3_HOST "examplebucket.s3.amazonaws.com"

/* The signature part of an Authorization value. */
static const char *sig_of(const char *auth)
{
	const char *s = strstr(auth, "Signature=");
	assert_non_null(s);
	return s + strlen("Signature=");
}

static void check(const struct sigv4_creds *c, const char *date, const struct sigv4_request *r,
		  const char *signed_headers, const char *want)
{
	char auth[1024];
	int n = sigv4_authorization(c, date, r, auth, sizeof(auth));
	assert_true(n > 0);
	assert_int_equal((size_t)n, strlen(auth));
	assert_string_equal(sig_of(auth), want);
	char sh[256];
	snprintf(sh, sizeof(sh), "SignedHeaders=%s,", signed_headers);
	assert_non_null(strstr(auth, sh));
	char cred[256];
	snprintf(cred, sizeof(cred), "AWS4-HMAC-SHA256 Credential=%s/%.8s/%s/%s/aws4_request, ",
		 c->access_key, date, c->region, c->service);
	assert_int_equal(strncmp(auth, cred, strlen(cred)), 0);
}

static void test_get_vanilla(void **state)
{
	(void)state;
	struct sigv4_pair h[] = {{"Host", SUITE_HOST}, {"X-Amz-Date", SUITE_DATE}};
	struct sigv4_request r = {.method = "GET", .path = "/", .headers = h, .nheaders = 2};
	char creq[512];
	assert_true(sigv4_canonical_request(&r, creq, sizeof(creq)) > 0);
	assert_string_equal(creq, "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:" SUITE_DATE
				  "\n\nhost;x-amz-date\n" SIGV4_EMPTY_SHA256);
	char sts[256];
	assert_true(sigv4_string_to_sign(&suite, SUITE_DATE, creq, sts, sizeof(sts)) > 0);
	assert_string_equal(
	    sts, "AWS4-HMAC-SHA256\n" SUITE_DATE "\n20150830/us-east-1/service/aws4_request\n"
		 "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63");
	check(&suite, SUITE_DATE, &r, "host;x-amz-date",
	      "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
}

static void test_get_vanilla_query_order(void **state)
{
	(void)state;
	struct sigv4_pair h[] = {{"host", SUITE_HOST}, {"x-amz-date", SUITE_DATE}};
	struct sigv4_pair q[] = {{"Param2", "value2"}, {"Param1", "value1"}};
	struct sigv4_request r = {
	    .method = "GET", .path = "/", .query = q, .nquery = 2, .headers = h, .nheaders = 2};
	check(&suite, SUITE_DATE, &r, "host;x-amz-date",
	      "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
}

static void test_get_vanilla_query_unreserved(void **state)
{
	(void)state;
	const char *u = "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
	struct sigv4_pair h[] = {{"host", SUITE_HOST}, {"x-amz-date", SUITE_DATE}};
	struct sigv4_pair q[] = {{u, u}};
	struct sigv4_request r = {
	    .method = "GET", .path = "/", .query = q, .nquery = 1, .headers = h, .nheaders = 2};
	check(&suite, SUITE_DATE, &r, "host;x-amz-date",
	      "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197");
	struct sigv4_request p = {.method = "GET", .path = u, .headers = h, .nheaders = 2};
	char path[128];
	snprintf(path, sizeof(path), "/%s", u);
	p.path = path;
	check(&suite, SUITE_DATE, &p, "host;x-amz-date",
	      "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f");
}

static void test_utf8(void **state)
{
	(void)state;
	struct sigv4_pair h[] = {{"host", SUITE_HOST}, {"x-amz-date", SUITE_DATE}};
	struct sigv4_request r = {
	    .method = "GET", .path = "/\xe1\x88\xb4", .headers = h, .nheaders = 2};
	check(&suite, SUITE_DATE, &r, "host;x-amz-date",
	      "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85");
	struct sigv4_pair q[] = {{"\xe1\x88\xb4", "bar"}};
	struct sigv4_request rq = {
	    .method = "GET", .path = "/", .query = q, .nquery = 1, .headers = h, .nheaders = 2};
	check(&suite, SUITE_DATE, &rq, "host;x-amz-date",
	      "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04");
}

static void test_header_value_trim(void **state)
{
	(void)state;
	struct sigv4_pair h[] = {{"host", SUITE_HOST},
				 {"My-Header1", " value1"},
				 {"My-Header2", " \"a   b   c\""},
				 {"x-amz-date", SUITE_DATE}};
	struct sigv4_request r = {.method = "GET", .path = "/", .headers = h, .nheaders = 4};
	check(&suite, SUITE_DATE, &r, "host;my-header1;my-header2;x-amz-date",
	      "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736");
}

static void test_post_vanilla(void **state)
{
	(void)state;
	struct sigv4_pair h[] = {{"x-amz-date", SUITE_DATE}, {"host", SUITE_HOST}};
	struct sigv4_request r = {.method = "POST", .path = "/", .headers = h, .nheaders = 2};
	check(&suite, SUITE_DATE, &r, "host;x-amz-date",
	      "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b");
	struct sigv4_pair q[] = {{"Param1", "value1"}};
	r.query = q;
	r.nquery = 1;
	check(&suite, SUITE_DATE, &r, "host;x-amz-date",
	      "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11");
}

static void test_post_query_nonunreserved(void **state)
{
	(void)state;
	struct sigv4_pair h[] = {{"host", SUITE_HOST}, {"x-amz-date", SUITE_DATE}};
	struct sigv4_pair q[] = {{"@#$%^", ""}, {"+", "/,?><`\";:\\|][{}"}};
	struct sigv4_request r = {
	    .method = "POST", .path = "/", .query = q, .nquery = 2, .headers = h, .nheaders = 2};
	check(&suite, SUITE_DATE, &r, "host;x-amz-date",
	      "66c82657c86e26fb25238d0e69f011edc4c6df5ae71119d7cb98ed9b87393c1e");
}

static void test_post_form_body(void **state)
{
	(void)state;
	char hash[65];
	assert_int_equal(sigv4_sha256_hex("Param1=value1", 13, hash), 0);
	struct sigv4_pair h[] = {{"Content-Type", "application/x-www-form-urlencoded"},
				 {"host", SUITE_HOST},
				 {"x-amz-date", SUITE_DATE}};
	struct sigv4_request r = {
	    .method = "POST", .path = "/", .headers = h, .nheaders = 3, .payload_hash = hash};
	check(&suite, SUITE_DATE, &r, "content-type;host;x-amz-date",
	      "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a");
}

static void test_session_token(void **state)
{
	(void)state;
	struct sigv4_pair h[] = {
	    {"host", SUITE_HOST},
	    {"x-amz-date", SUITE_DATE},
	    {"X-Amz-Security-Token",
	     "AQoDYXdzEPT//////////"
	     "wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD"
	     "8Y"
	     "UuwthAx7mSEI/qkPpKPi/"
	     "kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSX"
	     "Dvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+"
	     "scqKmlzm8FD"
	     "rypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA=="}};
	struct sigv4_request r = {.method = "POST", .path = "/", .headers = h, .nheaders = 3};
	check(&suite, SUITE_DATE, &r, "host;x-amz-date;x-amz-security-token",
	      "85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead");
}

static void test_s3_get_range(void **state)
{
	(void)state;
	struct sigv4_pair h[] = {{"Host", S3_HOST},
				 {"Range", "bytes=0-9"},
				 {"x-amz-content-sha256", SIGV4_EMPTY_SHA256},
				 {"x-amz-date", S3_DATE}};
	struct sigv4_request r = {.method = "GET",
				  .path = "/test.txt",
				  .headers = h,
				  .nheaders = 4,
				  .payload_hash = SIGV4_EMPTY_SHA256};
	check(&s3doc, S3_DATE, &r, "host;range;x-amz-content-sha256;x-amz-date",
	      "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

static void test_s3_put(void **state)
{
	(void)state;
	char hash[65];
	const char *body = "Welcome to Amazon S3.";
	assert_int_equal(sigv4_sha256_hex(body, strlen(body), hash), 0);
	assert_string_equal(hash,
			    "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
	struct sigv4_pair h[] = {{"Host", S3_HOST},
				 {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
				 {"x-amz-date", S3_DATE},
				 {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
				 {"x-amz-content-sha256", hash}};
	struct sigv4_request r = {.method = "PUT",
				  .path = "/test$file.text",
				  .headers = h,
				  .nheaders = 5,
				  .payload_hash = hash};
	char creq[1024];
	assert_true(sigv4_canonical_request(&r, creq, sizeof(creq)) > 0);
	assert_non_null(strstr(creq, "PUT\n/test%24file.text\n\n"));
	check(&s3doc, S3_DATE, &r, "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
	      "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

static void test_s3_queries(void **state)
{
	(void)state;
	struct sigv4_pair h[] = {{"Host", S3_HOST},
				 {"x-amz-content-sha256", SIGV4_EMPTY_SHA256},
				 {"x-amz-date", S3_DATE}};
	struct sigv4_pair q1[] = {{"lifecycle", ""}};
	struct sigv4_request r = {.method = "GET",
				  .path = "/",
				  .query = q1,
				  .nquery = 1,
				  .headers = h,
				  .nheaders = 3,
				  .payload_hash = SIGV4_EMPTY_SHA256};
	check(&s3doc, S3_DATE, &r, "host;x-amz-content-sha256;x-amz-date",
	      "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
	struct sigv4_pair q2[] = {{"prefix", "J"}, {"max-keys", "2"}};
	r.query = q2;
	r.nquery = 2;
	check(&s3doc, S3_DATE, &r, "host;x-amz-content-sha256;x-amz-date",
	      "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

static void test_small_buffers_and_helpers(void **state)
{
	(void)state;
	struct sigv4_pair h[] = {{"host", SUITE_HOST}, {"x-amz-date", SUITE_DATE}};
	struct sigv4_request r = {.method = "GET", .path = "/", .headers = h, .nheaders = 2};
	char small[40];
	assert_int_equal(sigv4_canonical_request(&r, small, sizeof(small)), -ENOSPC);
	assert_int_equal(sigv4_authorization(&suite, SUITE_DATE, &r, small, sizeof(small)),
			 -ENOSPC);
	struct sigv4_pair bad[] = {{"", "x"}};
	r.headers = bad;
	r.nheaders = 1;
	char big[512];
	assert_int_equal(sigv4_canonical_request(&r, big, sizeof(big)), -EINVAL);
	char d[17];
	sigv4_amz_date(1440938160, d); /* 2015-08-30 12:36:00 UTC */
	assert_string_equal(d, SUITE_DATE);
	char e[64];
	assert_int_equal(sigv4_uri_encode("a b/c+", 1, e, sizeof(e)), 10);
	assert_string_equal(e, "a%20b/c%2B");
	assert_int_equal(sigv4_uri_encode("a/b", 0, e, sizeof(e)), 5);
	assert_string_equal(e, "a%2Fb");
	assert_int_equal(sigv4_uri_encode("abcdef", 0, e, 4), -ENOSPC);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_get_vanilla),
	    cmocka_unit_test(test_get_vanilla_query_order),
	    cmocka_unit_test(test_get_vanilla_query_unreserved),
	    cmocka_unit_test(test_utf8),
	    cmocka_unit_test(test_header_value_trim),
	    cmocka_unit_test(test_post_vanilla),
	    cmocka_unit_test(test_post_query_nonunreserved),
	    cmocka_unit_test(test_post_form_body),
	    cmocka_unit_test(test_session_token),
	    cmocka_unit_test(test_s3_get_range),
	    cmocka_unit_test(test_s3_put),
	    cmocka_unit_test(test_s3_queries),
	    cmocka_unit_test(test_small_buffers_and_helpers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
