/*
 * cuda_update/tests/test_pipeline.c — what the sub-group pipeline computes,
 * on a temporary directory: native and DeepSpeed layouts, ascending and
 * alternating order, with and without --keep, content checked after several
 * steps against a float64 reference; alternating and ascending must agree
 * bit for bit; the step count must persist in the native header; the
 * half-precision param copy and new gradients between steps.
 */
#include "cuda_update/tests/pipeline_fixture.h"

#include <errno.h>

static void one_case(enum tu_layout layout, enum tu_dtype gdt, enum tu_order order, int keep)
{
	char *d = mktmp();
	char msg[512] = "";
	int rc = tu_init_dir(d, layout, PARAMS, SUBGROUP, gdt, 0, 7, msg, sizeof(msg));
	if (rc)
		print_error("init: %s\n", msg);
	assert_int_equal(rc, 0);
	struct model init, out;
	load(d, layout, &init);
	assert_int_equal(init.n, PARAMS);
	assert_int_equal(init.nsub, (PARAMS + SUBGROUP - 1) / SUBGROUP);
	struct tu_options o = opts(layout, order, keep);
	run(d, &o, STEPS);
	load(d, layout, &out);
	check_against_reference(&init, &out, &o.hp, STEPS, 0);
	if (layout == TU_LAYOUT_NATIVE)
		for (int i = 0; i < out.nsub; i++)
			assert_int_equal(out.native_step[i], STEPS);
	unload(&init);
	unload(&out);
	rmtmp(d);
}

static void test_native_ascending(void **s)
{
	(void)s;
	one_case(TU_LAYOUT_NATIVE, TU_BF16, TU_ORDER_ASCENDING, 0);
}

static void test_native_alternating_keep(void **s)
{
	(void)s;
	one_case(TU_LAYOUT_NATIVE, TU_F16, TU_ORDER_ALTERNATING, 2);
}

static void test_deepspeed_ascending(void **s)
{
	(void)s;
	one_case(TU_LAYOUT_DEEPSPEED, TU_BF16, TU_ORDER_ASCENDING, 0);
}

static void test_deepspeed_alternating(void **s)
{
	(void)s;
	one_case(TU_LAYOUT_DEEPSPEED, TU_BF16, TU_ORDER_ALTERNATING, 1);
}

static void test_native_ascending_keep(void **s)
{
	(void)s;
	one_case(TU_LAYOUT_NATIVE, TU_BF16, TU_ORDER_ASCENDING, 2);
}

static void test_deepspeed_extra_buffers(void **s)
{
	(void)s;
	char *d = mktmp();
	char msg[256];
	assert_int_equal(
	    tu_init_dir(d, TU_LAYOUT_DEEPSPEED, PARAMS, SUBGROUP, TU_BF16, 0, 2, msg, 256), 0);
	struct model init, out;
	load(d, TU_LAYOUT_DEEPSPEED, &init);
	struct tu_options o = opts(TU_LAYOUT_DEEPSPEED, TU_ORDER_ALTERNATING, 1);
	o.extra_buffers = 2;
	run(d, &o, STEPS);
	load(d, TU_LAYOUT_DEEPSPEED, &out);
	check_against_reference(&init, &out, &o.hp, STEPS, 0);
	unload(&init);
	unload(&out);
	rmtmp(d);
}

static void test_keep_all(void **s)
{
	(void)s;
	one_case(TU_LAYOUT_NATIVE, TU_BF16, TU_ORDER_ALTERNATING, 100);
}

/* Same files, several ways to run them: identical bytes. */
static void same_bytes(const char *a, const char *b, enum tu_layout layout)
{
	struct model x, y;
	load(a, layout, &x);
	load(b, layout, &y);
	assert_int_equal(x.n, y.n);
	assert_memory_equal(x.p, y.p, x.n * 4);
	assert_memory_equal(x.m, y.m, x.n * 4);
	assert_memory_equal(x.v, y.v, x.n * 4);
	assert_memory_equal(x.native_step, y.native_step, (size_t)x.nsub * 8);
	unload(&x);
	unload(&y);
}

static void bitwise_orders(enum tu_layout layout)
{
	char *a = mktmp(), *b = mktmp(), *c = mktmp();
	char msg[256];
	assert_int_equal(tu_init_dir(a, layout, PARAMS, SUBGROUP, TU_BF16, 0, 3, msg, 256), 0);
	assert_int_equal(tu_init_dir(b, layout, PARAMS, SUBGROUP, TU_BF16, 0, 3, msg, 256), 0);
	assert_int_equal(tu_init_dir(c, layout, PARAMS, SUBGROUP, TU_BF16, 0, 3, msg, 256), 0);
	struct tu_options asc = opts(layout, TU_ORDER_ASCENDING, 0);
	struct tu_options alt = opts(layout, TU_ORDER_ALTERNATING, 1);
	struct tu_options buf = opts(layout, TU_ORDER_ALTERNATING, 0);
	buf.buffered = 1;
	buf.threads = 1;
	run(a, &asc, 4);
	run(b, &alt, 4);
	run(c, &buf, 4);
	same_bytes(a, b, layout);
	same_bytes(a, c, layout);
	rmtmp(a);
	rmtmp(b);
	rmtmp(c);
}

static void test_alternating_equals_ascending_native(void **s)
{
	(void)s;
	bitwise_orders(TU_LAYOUT_NATIVE);
}

static void test_alternating_equals_ascending_deepspeed(void **s)
{
	(void)s;
	bitwise_orders(TU_LAYOUT_DEEPSPEED);
}

/* 3 steps then 2 in a new run == 5 in one run: the step count persists. */
static void test_step_persists(void **s)
{
	(void)s;
	char *a = mktmp(), *b = mktmp();
	char msg[256];
	assert_int_equal(tu_init_dir(a, TU_LAYOUT_NATIVE, 5000, 1500, TU_BF16, 0, 9, msg, 256), 0);
	assert_int_equal(tu_init_dir(b, TU_LAYOUT_NATIVE, 5000, 1500, TU_BF16, 0, 9, msg, 256), 0);
	struct tu_options o = opts(TU_LAYOUT_NATIVE, TU_ORDER_ALTERNATING, 1);
	run(a, &o, 3);
	run(a, &o, 2);
	run(b, &o, 5);
	same_bytes(a, b, TU_LAYOUT_NATIVE);
	struct model x;
	load(a, TU_LAYOUT_NATIVE, &x);
	assert_int_equal(x.native_step[0], 5);
	unload(&x);
	rmtmp(a);
	rmtmp(b);
}

/* --param-copy: the bf16 file holds the rounded updated params. */
static void test_param_copy_file(void **s)
{
	(void)s;
	char *d = mktmp();
	char msg[256], path[512];
	assert_int_equal(
	    tu_init_dir(d, TU_LAYOUT_NATIVE, PARAMS, SUBGROUP, TU_BF16, 0, 4, msg, 256), 0);
	/* left from a bigger model: the stale tail must go */
	snprintf(path, sizeof(path), "%s/sg-00000.param16", d);
	assert_int_equal(truncate(path, 0) == 0 || errno == ENOENT, 1);
	FILE *old = fopen(path, "wb");
	assert_non_null(old);
	assert_int_equal(fseek(old, 3 * SUBGROUP - 1, SEEK_SET), 0);
	assert_int_equal(fputc(1, old), 1);
	assert_int_equal(fclose(old), 0);
	struct tu_options o = opts(TU_LAYOUT_NATIVE, TU_ORDER_ALTERNATING, 1);
	o.param_copy = TU_BF16;
	run(d, &o, 2);
	struct model x;
	load(d, TU_LAYOUT_NATIVE, &x);
	uint16_t *h = malloc(x.n * 2);
	assert_non_null(h);
	size_t at = 0;
	for (int i = 0; i < x.nsub; i++) {
		size_t n = i < x.nsub - 1 ? SUBGROUP : PARAMS - (size_t)SUBGROUP * (size_t)i;
		snprintf(path, sizeof(path), "%s/sg-%05d.param16", d, i);
		struct stat st;
		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_size, 2 * n);
		read_all(path, h + at, 2 * n);
		at += n;
	}
	for (size_t i = 0; i < x.n; i++)
		assert_int_equal(h[i], tu_f32_to_bf16(x.p[i]));
	free(h);
	unload(&x);
	rmtmp(d);
}

/* The training-loop use: one context, one tu_run per step, new gradients
 * written between steps (as backward does). Resident sub-groups must not
 * keep the previous step's gradients. */
static void test_new_gradients_each_step(void **s)
{
	(void)s;
	char *d = mktmp();
	char msg[256], path[512];
	assert_int_equal(
	    tu_init_dir(d, TU_LAYOUT_NATIVE, PARAMS, SUBGROUP, TU_BF16, 0, 5, msg, 256), 0);
	struct model init;
	load(d, TU_LAYOUT_NATIVE, &init);
	struct tu_options o = opts(TU_LAYOUT_NATIVE, TU_ORDER_ALTERNATING, 1);
	struct tu_ctx *c;
	assert_int_equal(tu_open(&c, d, &o), 0);
	double *g[3];
	for (int st = 0; st < 3; st++) {
		g[st] = malloc(init.n * 8);
		assert_non_null(g[st]);
		size_t at = 0;
		for (int i = 0; i < init.nsub; i++) {
			size_t n =
			    i < init.nsub - 1 ? SUBGROUP : PARAMS - (size_t)SUBGROUP * (size_t)i;
			uint16_t *h = malloc(n * 2);
			assert_non_null(h);
			for (size_t k = 0; k < n; k++) {
				h[k] = tu_f32_to_bf16(st == 0 ? (float)init.g[at + k]
							      : 0.01f * (float)((at + k) % 97) -
								    0.4f * (float)st);
				g[st][at + k] = tu_bf16_to_f32(h[k]);
			}
			snprintf(path, sizeof(path), "%s/sg-%05d.grad", d, i);
			FILE *f = fopen(path, "r+b");
			assert_non_null(f);
			assert_int_equal(fwrite(h, 2, n, f), n);
			assert_int_equal(fclose(f), 0);
			free(h);
			at += n;
		}
		assert_int_equal(tu_run(c, 1, NULL, NULL, NULL), 0);
	}
	tu_close(c);
	struct model out;
	load(d, TU_LAYOUT_NATIVE, &out);
	const double *gg[3] = {g[0], g[1], g[2]};
	check_against_reference2(&init, gg, &out, &o.hp, 3, 0);
	for (int st = 0; st < 3; st++)
		free(g[st]);
	unload(&init);
	unload(&out);
	rmtmp(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_native_ascending),
	    cmocka_unit_test(test_native_alternating_keep),
	    cmocka_unit_test(test_deepspeed_ascending),
	    cmocka_unit_test(test_deepspeed_alternating),
	    cmocka_unit_test(test_native_ascending_keep),
	    cmocka_unit_test(test_deepspeed_extra_buffers),
	    cmocka_unit_test(test_keep_all),
	    cmocka_unit_test(test_alternating_equals_ascending_native),
	    cmocka_unit_test(test_alternating_equals_ascending_deepspeed),
	    cmocka_unit_test(test_step_persists),
	    cmocka_unit_test(test_param_copy_file),
	    cmocka_unit_test(test_new_gradients_each_step),
	};
	return cmocka_run_group_tests_name("cuda_update_pipeline", tests, NULL, NULL);
}
