/*
 * cuda_update/tests/test_pipeline_files.c — the files the pipeline is given:
 * mis-sized, missing and corrupted ones reported by name with both sizes,
 * DeepSpeed's padding and gaps, more gradient files than may be open at
 * once, and a ring the kernel refuses to submit.
 */
#include "cuda_update/tests/pipeline_fixture.h"

#include <dlfcn.h>
#include <errno.h>
#include <liburing.h>
#include <sys/resource.h>

/* io_uring_submit fails while this is set; the pipeline, linked into
 * this program, calls this one. */
static int fail_submit;

int io_uring_submit(struct io_uring *ring)
{
	static int (*real)(struct io_uring *);
	if (fail_submit)
		return -EIO;
	if (!real)
		real = (int (*)(struct io_uring *))dlsym(RTLD_NEXT, "io_uring_submit");
	return real ? real(ring) : -ENOSYS;
}

static void expect_open_error(const char *dir, enum tu_layout layout, const char *needle1,
			      const char *needle2)
{
	struct tu_ctx *c;
	struct tu_options o = opts(layout, TU_ORDER_ASCENDING, 0);
	int rc = tu_open(&c, dir, &o);
	assert_true(rc < 0);
	const char *m = tu_errmsg(c);
	if (!strstr(m, needle1) || (needle2 && !strstr(m, needle2)))
		print_error("message '%s' lacks '%s' / '%s'\n", m, needle1, needle2 ? needle2 : "");
	assert_non_null(strstr(m, needle1));
	if (needle2)
		assert_non_null(strstr(m, needle2));
	tu_close(c);
}

/* Headers two steps apart are no interrupted run: refused, by name. */
static void test_steps_far_apart(void **s)
{
	(void)s;
	char *d = mktmp();
	char msg[256], path[512];
	assert_int_equal(tu_init_dir(d, TU_LAYOUT_NATIVE, 5000, 1500, TU_BF16, 0, 9, msg, 256), 0);
	snprintf(path, sizeof(path), "%s/sg-00001.state", d);
	int fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	uint64_t two = 2;
	assert_int_equal(pwrite(fd, &two, 8, offsetof(struct tu_native_hdr, step)), 8);
	assert_int_equal(close(fd), 0);
	expect_open_error(d, TU_LAYOUT_NATIVE, "sg-00001.state", "more than one step apart");
	rmtmp(d);
}

static void test_errors_name_the_file(void **s)
{
	(void)s;
	char *d = mktmp();
	char msg[256], path[512];
	/* DeepSpeed: exp_avg one float short */
	assert_int_equal(tu_init_dir(d, TU_LAYOUT_DEEPSPEED, 4096, 2048, TU_BF16, 0, 1, msg, 256),
			 0);
	snprintf(path, sizeof(path), "%s/zero_stage_3/optimizer/rank0/exp_avg-3_5.tensor.swp", d);
	assert_int_equal(truncate(path, 8188), 0);
	expect_open_error(d, TU_LAYOUT_DEEPSPEED, "exp_avg-3_5.tensor.swp: size 8188",
			  "expected 8192");
	/* missing exp_avg_sq */
	assert_int_equal(truncate(path, 8192), 0);
	snprintf(path, sizeof(path), "%s/zero_stage_3/optimizer/rank0/exp_avg_sq-0_2.tensor.swp",
		 d);
	assert_int_equal(unlink(path), 0);
	expect_open_error(d, TU_LAYOUT_DEEPSPEED, "exp_avg_sq-0_2.tensor.swp", "missing");
	/* native: truncated state, missing gradients */
	assert_int_equal(tu_init_dir(d, TU_LAYOUT_NATIVE, 4096, 2048, TU_BF16, 0, 1, msg, 256), 0);
	snprintf(path, sizeof(path), "%s/sg-00001.state", d);
	assert_int_equal(truncate(path, 4096 + 100), 0);
	expect_open_error(d, TU_LAYOUT_NATIVE, "sg-00001.state: size 4196", "expected 28672");
	assert_int_equal(tu_init_dir(d, TU_LAYOUT_NATIVE, 4096, 2048, TU_BF16, 0, 1, msg, 256), 0);
	snprintf(path, sizeof(path), "%s/sg-00000.grad", d);
	assert_int_equal(unlink(path), 0);
	expect_open_error(d, TU_LAYOUT_NATIVE, "sg-00000.grad", "No such file");
	/* numel with bit 63 set: 12 * numel wraps around to the real size */
	assert_int_equal(tu_init_dir(d, TU_LAYOUT_NATIVE, 4096, 2048, TU_BF16, 0, 1, msg, 256), 0);
	snprintf(path, sizeof(path), "%s/sg-00001.state", d);
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	uint64_t numel;
	assert_int_equal(pread(fd, &numel, 8, offsetof(struct tu_native_hdr, numel)), 8);
	numel ^= UINT64_C(1) << 63;
	assert_int_equal(pwrite(fd, &numel, 8, offsetof(struct tu_native_hdr, numel)), 8);
	assert_int_equal(close(fd), 0);
	expect_open_error(d, TU_LAYOUT_NATIVE, "sg-00001.state: header says 9223372036854777856",
			  "corrupted header");
	rmtmp(d);
	char *e = mktmp();
	expect_open_error(e, TU_LAYOUT_DEEPSPEED, "rank0", NULL);
	rmtmp(e);
}

/* DeepSpeed pads swap files to 1024 B: a param file 100 floats longer than
 * its gradient files is accepted, the padding gets zero gradients; 256 or
 * more uncovered elements are an error naming the sub-group. */
static void test_deepspeed_padding(void **s)
{
	(void)s;
	char *d = mktmp();
	char msg[256], path[512];
	assert_int_equal(tu_init_dir(d, TU_LAYOUT_DEEPSPEED, 28672, 8192, TU_BF16, 0, 6, msg, 256),
			 0);
	const char *pre[] = {"", "exp_avg-", "exp_avg_sq-"};
	for (int k = 0; k < 3; k++) {
		snprintf(path, sizeof(path), "%s/zero_stage_3/optimizer/rank0/%s9_11.tensor.swp", d,
			 pre[k]);
		assert_int_equal(truncate(path, 4 * (4096 + 100)), 0);
	}
	struct model init, out;
	load(d, TU_LAYOUT_DEEPSPEED, &init);
	/* 4 sub-groups, the padded last one smaller than the others: its
	 * padding lands in a reused buffer where another sub-group's v was */
	assert_int_equal(init.n, 28672 + 100);
	for (size_t i = 28672; i < 28772; i++)
		init.g[i] = 0; /* what the updater must use for padding */
	struct tu_options o = opts(TU_LAYOUT_DEEPSPEED, TU_ORDER_ALTERNATING, 0);
	run(d, &o, 2);
	load(d, TU_LAYOUT_DEEPSPEED, &out);
	check_against_reference(&init, &out, &o.hp, 2, 0);
	unload(&init);
	unload(&out);
	for (int k = 0; k < 3; k++) {
		snprintf(path, sizeof(path), "%s/zero_stage_3/optimizer/rank0/%s9_11.tensor.swp", d,
			 pre[k]);
		assert_int_equal(truncate(path, 4 * (4096 + 256)), 0);
	}
	expect_open_error(d, TU_LAYOUT_DEEPSPEED, "gradients cover 4096 elements", "expected 4352");
	rmtmp(d);
}

/* Real DeepSpeed leaves gaps in a sub-group's gradient files: small
 * tensors, and each tensor's last numel mod 256 elements, stay in its
 * memory. A sub-group whose gradients do not all come from files is
 * refused with the elements missing and why, never updated with zeros. */
static void test_deepspeed_gap(void **s)
{
	(void)s;
	char *d = mktmp();
	char msg[256], path[512];
	assert_int_equal(tu_init_dir(d, TU_LAYOUT_DEEPSPEED, 28672, 8192, TU_BF16, 0, 6, msg, 256),
			 0);
	snprintf(path, sizeof(path),
		 "%s/zero_stage_3/optimizer/rank0/9_11_gradient_0_1024.tensor.swp", d);
	assert_int_equal(unlink(path), 0);
	expect_open_error(d, TU_LAYOUT_DEEPSPEED, "elements 0-1023 of sub-group 9_11",
			  "DeepSpeed keeps gradients");
	rmtmp(d);
}

/* DeepSpeed writes one gradient file per parameter tensor: a sub-group may
 * have thousands, more than RLIMIT_NOFILE allows open at once. */
#define MANY_GRADS 1500
#define GRAD_NUMEL 16
/* A DeepSpeed rank directory of one sub-group with MANY_GRADS gradient
 * files; returns the temporary directory. */
static char *make_many_grads(void)
{
	char *d = mktmp();
	char path[512], rdir[400];
	snprintf(rdir, sizeof(rdir), "%s/zero_stage_3", d);
	assert_int_equal(mkdir(rdir, 0700), 0);
	snprintf(rdir, sizeof(rdir), "%s/zero_stage_3/optimizer", d);
	assert_int_equal(mkdir(rdir, 0700), 0);
	snprintf(rdir, sizeof(rdir), "%s/zero_stage_3/optimizer/rank0", d);
	assert_int_equal(mkdir(rdir, 0700), 0);
	size_t n = (size_t)MANY_GRADS * GRAD_NUMEL;
	float *x = malloc(n * 4);
	assert_non_null(x);
	static const char *pre[] = {"", "exp_avg-", "exp_avg_sq-"};
	for (int k = 0; k < 3; k++) {
		for (size_t i = 0; i < n; i++)
			x[i] = k == 0 ? 0.001f * (float)(i % 997) : k == 1 ? 0.0f : 1e-6f;
		snprintf(path, sizeof(path), "%s/%s0_99.tensor.swp", rdir, pre[k]);
		write_floats(path, x, n);
	}
	for (int g = 0; g < MANY_GRADS; g++) {
		for (size_t i = 0; i < GRAD_NUMEL; i++)
			x[i] = 0.01f * (float)((g + (int)i) % 13) - 0.06f;
		snprintf(path, sizeof(path), "%s/0_99_gradient_%d_%d.tensor.swp", rdir,
			 g * GRAD_NUMEL, GRAD_NUMEL);
		write_floats(path, x, GRAD_NUMEL);
	}
	free(x);
	return d;
}

static void test_deepspeed_many_gradient_files(void **s)
{
	(void)s;
	char *d = make_many_grads();
	struct model init, out;
	load(d, TU_LAYOUT_DEEPSPEED, &init);
	struct rlimit old, low;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = 256;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	struct tu_options o = opts(TU_LAYOUT_DEEPSPEED, TU_ORDER_ASCENDING, 0);
	struct tu_ctx *c;
	int rc = tu_open(&c, d, &o);
	if (!rc)
		rc = tu_run(c, 2, NULL, NULL, NULL);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	if (rc)
		print_error("%s\n", tu_errmsg(c));
	assert_int_equal(rc, 0);
	tu_close(c);
	load(d, TU_LAYOUT_DEEPSPEED, &out);
	check_against_reference(&init, &out, &o.hp, 2, 0);
	unload(&init);
	unload(&out);
	rmtmp(d);
}

/* More requests than the ring holds, and the kernel refuses the submit
 * that would make room: the run must end with the error, not wait for
 * completions of requests that were never queued. */
static void test_submit_fails(void **s)
{
	(void)s;
	char *d = make_many_grads();
	struct tu_options o = opts(TU_LAYOUT_DEEPSPEED, TU_ORDER_ASCENDING, 0);
	struct tu_ctx *c;
	assert_int_equal(tu_open(&c, d, &o), 0);
	fail_submit = 1;
	int rc = tu_run(c, 1, NULL, NULL, NULL);
	fail_submit = 0;
	assert_int_equal(rc, -EIO);
	assert_non_null(strstr(tu_errmsg(c), "io_uring_submit"));
	tu_close(c);
	rmtmp(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_errors_name_the_file),
	    cmocka_unit_test(test_deepspeed_padding),
	    cmocka_unit_test(test_deepspeed_gap),
	    cmocka_unit_test(test_deepspeed_many_gradient_files),
	    cmocka_unit_test(test_submit_fails),
	    cmocka_unit_test(test_steps_far_apart),
	};
	return cmocka_run_group_tests_name("cuda_update_pipeline_files", tests, NULL, NULL);
}
