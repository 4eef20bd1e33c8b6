/*
 * tests/bench/growtime.c — how long growing the order learner takes, and
 * how much of it holds the cache's lock (fs/engine.c grow_run): the copy
 * of the recording (order_seed_take) and the hand-over (order_grow_finish)
 * run under it, the replay into the larger learner (order_seed_grow) off
 * it. A learner of 2^K accesses learns a cycle of three quarters of that,
 * then doubles.
 *
 *   build/tests/bench/growtime K      (K from 10 to 23)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "policy/order.h"

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	int k = argc == 2 ? atoi(argv[1]) : 0;
	if (k < 10 || k > 23) {
		fprintf(stderr, "usage: %s K (10..23): grow a learner of 2^K accesses\n", argv[0]);
		return 2;
	}
	size_t size = (size_t)1 << k, cycle = size / 4 * 3;
	struct order_params p = {.max_cycle = size};
	struct order *o, *g;
	struct order_seed *s;
	int rc = order_create(&p, &o);
	if (rc) {
		fprintf(stderr, "order_create(2^%d): %s\n", k, strerror(-rc));
		return 1;
	}
	/* Three steps over 97 files, a block of each in turn. */
	for (int step = 0; step < 3; step++)
		for (size_t i = 0; i < cycle; i++)
			order_access(o, (uint64_t)(i % 97 + 1) << 24 | (i / 97), i & 1);
	double t0 = now_s();
	rc = order_seed_take(o, 2 * size, &s);
	double t1 = now_s();
	if (!rc)
		rc = order_seed_grow(s, &g);
	double t2 = now_s();
	if (rc) {
		fprintf(stderr, "growing to 2^%d: %s\n", k + 1, strerror(-rc));
		return 1;
	}
	order_grow_finish(g, o);
	double t3 = now_s();
	printf("2^%d to 2^%d, cycle %zu (learned: %s, after: %s): %.3f s, %.3f s of it under "
	       "the lock (copy %.3f s, hand-over %.6f s), %.3f s off it\n",
	       k, k + 1, cycle, order_learned(o) ? "yes" : "no", order_learned(g) ? "yes" : "no",
	       t3 - t0, (t1 - t0) + (t3 - t2), t1 - t0, t3 - t2, t2 - t1);
	order_seed_free(s);
	order_destroy(g);
	order_destroy(o);
	return 0;
}
