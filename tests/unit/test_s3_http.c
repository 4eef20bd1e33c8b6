/*
 * tests/unit/test_s3_http.c — the s3 tier's request helpers that need no
 * server: object keys (spread, parse back, foreign keys refused), the S3
 * error code of an error body, and the retry back-off (full jitter inside
 * a growing window, no retry past the attempts or the time allowed).
 * The requests themselves are tested against a real server by the
 * integration tests.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tiers/s3_int.h"

static void init_tier(struct s3_tier *s, const char *prefix)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->p.prefix, sizeof(s->p.prefix), "%s", prefix);
	s->p.retries = 5;
	s->p.retry_time_ms = 60 * 1000;
}

static void test_keys(void **state)
{
	(void)state;
	static struct s3_tier s;
	init_tier(&s, "node0/");
	char key[256];
	unsigned spread[256] = {0};
	for (uint64_t slot = 0; slot < 4096; slot++) {
		s3_object_key(&s, slot, key, sizeof(key));
		assert_int_equal(strlen(key), strlen("node0/") + 2 + 1 + 16);
		assert_int_equal(strncmp(key, "node0/", 6), 0);
		uint64_t back = UINT64_MAX;
		assert_true(s3_parse_key(&s, key, &back));
		assert_int_equal(back, slot);
		unsigned hi;
		assert_int_equal(sscanf(key + 6, "%2x", &hi), 1);
		spread[hi]++;
	}
	/* The hash spreads consecutive slots over the 256 key ranges. */
	unsigned used = 0;
	for (int i = 0; i < 256; i++)
		used += spread[i] > 0;
	assert_true(used > 200);

	uint64_t v;
	s3_object_key(&s, 1000, key, sizeof(key));
	char bad[256];
	snprintf(bad, sizeof(bad), "%s", key);
	bad[6] = bad[6] == '0' ? '1' : '0'; /* wrong spread digits */
	assert_false(s3_parse_key(&s, bad, &v));
	assert_false(s3_parse_key(&s, "node0/tierfs.lease", &v));
	assert_false(s3_parse_key(&s, "node1/8d/00000000000003e8", &v));
	assert_false(s3_parse_key(&s, "node0/8d/00000000000003E8", &v));
	assert_false(s3_parse_key(&s, "node0/8d/00000000000003e8x", &v));
	assert_false(s3_parse_key(&s, "node0/other", &v));
	/* An empty prefix works the same. */
	init_tier(&s, "");
	s3_object_key(&s, 77, key, sizeof(key));
	assert_true(s3_parse_key(&s, key, &v));
	assert_int_equal(v, 77);
}

static void test_error_code(void **state)
{
	(void)state;
	struct s3_req r;
	memset(&r, 0, sizeof(r));
	char code[64];
	s3_error_code(&r, code, sizeof(code));
	assert_string_equal(code, "");
	char body[] = "<?xml version=\"1.0\"?><Error><Code>NoSuchBucket</Code><Message>The "
		      "specified bucket does not exist</Message></Error>";
	r.resp = body;
	s3_error_code(&r, code, sizeof(code));
	assert_string_equal(code, "NoSuchBucket");
	char small[5];
	s3_error_code(&r, small, sizeof(small));
	assert_string_equal(small, "NoSu");
	char broken[] = "<Error><Code>SlowDown";
	r.resp = broken;
	s3_error_code(&r, code, sizeof(code));
	assert_string_equal(code, "");
}

static void test_retry_delay(void **state)
{
	(void)state;
	static struct s3_tier s;
	init_tier(&s, "p/");
	struct s3_req r;
	memset(&r, 0, sizeof(r));
	r.first_ns = tier_now_ns();
	uint64_t max_seen[5] = {0};
	for (int k = 0; k < 2000; k++) {
		for (unsigned a = 1; a < 5; a++) {
			r.attempts = a;
			uint64_t d = s3_retry_delay(&s, &r);
			assert_true(d > 0);
			/* Full jitter: within the window of this attempt. */
			assert_true(d <= (50ULL * 1000000) << (a - 1));
			if (d > max_seen[a])
				max_seen[a] = d;
		}
	}
	/* The window grows: later attempts wait longer at the most. */
	for (unsigned a = 2; a < 5; a++)
		assert_true(max_seen[a] > max_seen[a - 1]);
	r.attempts = 5; /* as many as allowed */
	assert_int_equal(s3_retry_delay(&s, &r), 0);
	r.attempts = 30; /* far along: the window stops at the cap */
	s.p.retries = 100;
	for (int k = 0; k < 100; k++)
		assert_true(s3_retry_delay(&s, &r) <= 5ULL * 1000000000);
	/* Past the time allowed: no more attempts. */
	s.p.retry_time_ms = 1;
	r.attempts = 1;
	r.first_ns = tier_now_ns() - 2000000;
	assert_int_equal(s3_retry_delay(&s, &r), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_keys),
	    cmocka_unit_test(test_error_code),
	    cmocka_unit_test(test_retry_delay),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
