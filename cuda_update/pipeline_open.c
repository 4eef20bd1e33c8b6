/*
 * cuda_update/pipeline_open.c — opens and closes a pipeline context: scans the
 * directory's layout, adds the optional half-precision param files, removes
 * temporary files a crash left, allocates the slot pool (its size is
 * explained in pipeline.c), caps the files open at once under RLIMIT_NOFILE,
 * reads the fault-injection settings (see pipeline_io.c) and sets up the
 * ring. Also the context's error message and its accessors.
 */
#include "cuda_update/pipeline_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define RING_ENTRIES 256

int tu_set_err(struct tu_ctx *c, int err, const char *fmt, ...)
{
	if (c->err)
		return c->err;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
	va_end(ap);
	c->err = err;
	return err;
}

const char *tu_errmsg(const struct tu_ctx *c)
{
	return c->msg[0] ? c->msg : "no error";
}

int tu_num_subgroups(const struct tu_ctx *c)
{
	return c->li.nsub;
}

uint64_t tu_total_params(const struct tu_ctx *c)
{
	return c->li.total_params;
}

static void free_slots(struct tu_ctx *c)
{
	for (int i = 0; c->slots && i < c->nslots; i++) {
		if (c->cuda_host)
			tu_cuda_host_free(c->slots[i].buf);
		else
			free(c->slots[i].buf);
	}
	free(c->slots);
	c->slots = NULL;
}

void tu_close(struct tu_ctx *c)
{
	if (!c)
		return;
	if (c->ring_ok)
		io_uring_queue_exit(&c->ring);
	free_slots(c);
	tu_layout_free(&c->li);
	free(c->dir);
	free(c);
}

/* Adds the output-only half-precision param file to every sub-group. */
static int add_param_copy(struct tu_ctx *c)
{
	if (c->o.layout != TU_LAYOUT_NATIVE)
		return tu_set_err(c, -EINVAL, "--param-copy needs the native layout");
	if (c->o.param_copy != TU_BF16 && c->o.param_copy != TU_F16)
		return tu_set_err(c, -EINVAL, "--param-copy: bf16 or fp16 only");
	c->li.max_buf_bytes = 0;
	for (int i = 0; i < c->li.nsub; i++) {
		struct tu_subgroup *g = &c->li.sub[i];
		struct tu_seg *ns = realloc(g->seg, (size_t)(g->nseg + 1) * sizeof(*ns));
		if (!ns)
			return tu_set_err(c, -ENOMEM, "out of memory");
		g->seg = ns;
		g->copy_off = g->buf_bytes; /* buf_bytes is TU_ALIGN aligned */
		g->buf_bytes += (2 * g->numel + TU_ALIGN - 1) & ~(uint64_t)(TU_ALIGN - 1);
		char *path;
		if (asprintf(&path, "%s/%s.param16", c->dir, g->name) < 0)
			return tu_set_err(c, -ENOMEM, "out of memory");
		g->seg[g->nseg++] = (struct tu_seg){path, 2 * g->numel, g->copy_off, 1, 1, NULL};
		if (g->buf_bytes > c->li.max_buf_bytes)
			c->li.max_buf_bytes = g->buf_bytes;
	}
	return 0;
}

int tu_open(struct tu_ctx **out, const char *dir, const struct tu_options *o)
{
	struct tu_ctx *c = calloc(1, sizeof(*c));
	*out = c;
	if (!c)
		return -ENOMEM;
	c->o = *o;
	c->dir = strdup(dir);
	if (!c->dir)
		return tu_set_err(c, -ENOMEM, "out of memory");
	int rc = tu_layout_scan(dir, o->layout, o->rank, &c->li, c->msg, sizeof(c->msg));
	if (rc)
		return c->err = rc;
	if (o->param_copy != TU_F32 && (rc = add_param_copy(c)))
		return rc;
	/* A crash during write-back leaves a partial temporary file behind:
	 * the state file beside it is whole, the leftover is only space. */
	for (int i = 0; i < c->li.nsub; i++)
		for (int k = 0; k < c->li.sub[i].nseg; k++) {
			const char *t = c->li.sub[i].seg[k].tmp_path;
			if (t && unlink(t) < 0 && errno != ENOENT)
				return tu_set_err(c, -errno, "%s: remove stale temporary file: %s",
						  t, strerror(errno));
		}
	if (o->layout == TU_LAYOUT_NATIVE) {
		c->base_step = o->first_step ? o->first_step - 1 : c->li.native_step;
		c->resume = 1;
	} else
		c->base_step = o->first_step ? o->first_step - 1 : 0;
	if (o->device == TU_DEVICE_CUDA) {
		const char *why = NULL;
		if ((rc = tu_cuda_probe(&why)))
			return tu_set_err(c, rc, "%s", why ? why : "CUDA unavailable");
	} else if (o->isa != TU_ISA_AUTO && !tu_isa_available(o->isa)) {
		return tu_set_err(c, -ENOTSUP, "this CPU cannot run the %s kernel",
				  tu_isa_name(o->isa));
	}
	if (c->o.keep < 0)
		c->o.keep = 0;
	if (c->o.keep > c->li.nsub)
		c->o.keep = c->li.nsub;
	if (c->o.extra_buffers < 0 || c->o.extra_buffers > 64)
		return tu_set_err(c, -EINVAL, "extra buffers: %d is not in 0..64",
				  c->o.extra_buffers);
	c->nslots = c->o.keep + 3 + c->o.extra_buffers;
	c->slots = calloc((size_t)c->nslots, sizeof(*c->slots));
	if (!c->slots)
		return tu_set_err(c, -ENOMEM, "out of memory");
	c->cuda_host = o->device == TU_DEVICE_CUDA;
	for (int i = 0; i < c->nslots; i++) {
		struct slot *s = &c->slots[i];
		s->sg = -1;
		size_t bytes = c->li.max_buf_bytes;
		if (c->cuda_host)
			s->buf = tu_cuda_host_alloc(bytes);
		else if (posix_memalign((void **)&s->buf, TU_ALIGN, bytes))
			s->buf = NULL;
		if (!s->buf) {
			int want = c->nslots;
			c->nslots = i; /* what free_slots() must release */
			return tu_set_err(c, -ENOMEM,
					  "out of memory: %d buffers of %.1f MiB (the largest "
					  "sub-group) do not fit; lower --keep, --extra-buffers or "
					  "the sub-group size",
					  want, (double)bytes / 1048576.0);
		}
		/* Touch now: first touch of fresh pages is slow and would be
		 * charged to the first step's I/O. */
		memset(s->buf, 0, bytes);
	}
	/* Half the descriptors left under RLIMIT_NOFILE, less a reserve for
	 * the rest of the process. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return tu_set_err(c, -errno, "getrlimit(RLIMIT_NOFILE): %s", strerror(errno));
	rlim_t lim = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 1 << 20 ? 1 << 20 : rl.rlim_cur;
	c->max_files = lim > 96 ? (int)(lim - 64) / 2 : 16;
	const char *crash = getenv("TIERFS_UPDATE_CRASH_AFTER");
	if (crash)
		c->crash_after = strtol(crash, NULL, 10);
	const char *fail = getenv("TIERFS_UPDATE_FAIL_AFTER");
	if (fail)
		c->fail_after = strtol(fail, NULL, 10);
	rc = io_uring_queue_init(RING_ENTRIES, &c->ring, 0);
	if (rc)
		return tu_set_err(c, rc, "io_uring_queue_init: %s", strerror(-rc));
	c->ring_ok = 1;
	return 0;
}
