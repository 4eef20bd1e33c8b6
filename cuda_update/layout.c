/*
 * cuda_update/layout.c — finds and validates the sub-groups of a directory in
 * DeepSpeed's swap layout or the native layout (see layout.h), and writes
 * synthetic models in either layout for the demo, the bench and the tests.
 *
 * Sizes are checked up front because DeepSpeed itself requires exact sizes
 * and a short file would otherwise surface as a confusing short read in the
 * middle of a step.
 */
#include "cuda_update/layout.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int fail(char *msg, size_t len, int err, const char *fmt, ...)
{
	if (msg && len) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(msg, len, fmt, ap);
		va_end(ap);
	}
	return err;
}

static uint64_t up(uint64_t x)
{
	return (x + TU_ALIGN - 1) & ~(uint64_t)(TU_ALIGN - 1);
}

/* Checks that path exists with exactly `want` bytes. */
static int check_size(const char *path, uint64_t want, char *msg, size_t len)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return fail(msg, len, -errno, "%s: %s", path, strerror(errno));
	if ((uint64_t)st.st_size != want)
		return fail(msg, len, -EINVAL, "%s: size %" PRIu64 " bytes, expected %" PRIu64,
			    path, (uint64_t)st.st_size, want);
	return 0;
}

void tu_layout_free(struct tu_layout_info *li)
{
	for (int i = 0; li->sub && i < li->nsub; i++) {
		for (int j = 0; j < li->sub[i].nseg; j++) {
			free(li->sub[i].seg[j].path);
			free(li->sub[i].seg[j].tmp_path);
		}
		free(li->sub[i].seg);
		free(li->sub[i].name);
	}
	free(li->sub);
	memset(li, 0, sizeof(*li));
}

static int read_native_hdr(const char *path, struct tu_native_hdr *h, char *msg, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(msg, len, -errno, "%s: %s", path, strerror(errno));
	ssize_t r = pread(fd, h, sizeof(*h), 0);
	int e = errno;
	close(fd);
	if (r < 0)
		return fail(msg, len, -e, "%s: read header: %s", path, strerror(e));
	if (r != (ssize_t)sizeof(*h) || memcmp(h->magic, TU_NATIVE_MAGIC, 8) != 0)
		return fail(msg, len, -EINVAL, "%s: not a tierfs-update state file (bad magic)",
			    path);
	if (h->version != TU_NATIVE_VERSION)
		return fail(msg, len, -EINVAL, "%s: format version %u, this build reads %u", path,
			    h->version, TU_NATIVE_VERSION);
	if (h->grad_dtype != TU_BF16 && h->grad_dtype != TU_F16)
		return fail(msg, len, -EINVAL, "%s: bad gradient dtype %u", path, h->grad_dtype);
	return 0;
}

static int scan_native(const char *dir, struct tu_layout_info *li, char *msg, size_t len)
{
	char path[4096];
	struct tu_native_hdr h0;
	snprintf(path, sizeof(path), "%s/sg-00000.state", dir);
	int rc = read_native_hdr(path, &h0, msg, len);
	if (rc)
		return rc;
	if (h0.nsub == 0 || h0.nsub > 10000000)
		return fail(msg, len, -EINVAL, "%s: bad sub-group count %" PRIu64, path, h0.nsub);
	li->nsub = (int)h0.nsub;
	uint64_t lo = h0.step, hi = h0.step;
	li->sub = calloc(h0.nsub, sizeof(*li->sub));
	if (!li->sub)
		return fail(msg, len, -ENOMEM, "out of memory for %" PRIu64 " sub-groups", h0.nsub);
	for (int i = 0; i < li->nsub; i++) {
		struct tu_subgroup *s = &li->sub[i];
		struct tu_native_hdr h;
		snprintf(path, sizeof(path), "%s/sg-%05d.state", dir, i);
		if ((rc = read_native_hdr(path, &h, msg, len)))
			return rc;
		if (h.index != (uint64_t)i || h.nsub != h0.nsub)
			return fail(msg, len, -EINVAL,
				    "%s: header says sub-group %" PRIu64 " of %" PRIu64
				    ", expected %d of %" PRIu64,
				    path, h.index, h.nsub, i, h0.nsub);
		/* Each file is replaced whole once its step is done, so an
		 * interrupted run leaves sub-groups at two steps, one apart. */
		s->hdr_step = h.step;
		lo = h.step < lo ? h.step : lo;
		hi = h.step > hi ? h.step : hi;
		if (hi > lo + 1)
			return fail(msg, len, -EINVAL,
				    "%s: %" PRIu64 " steps applied, another sub-group has %" PRIu64
				    ": more than one step apart, which no resume can fix (a run "
				    "killed while --keep "
				    "held sub-groups unwritten leaves this: restore a checkpoint)",
				    path, h.step, h.step == hi ? lo : hi);
		if (h.numel == 0 || h.numel > TU_MAX_NUMEL)
			return fail(msg, len, -EINVAL,
				    "%s: header says %" PRIu64
				    " params, not in 1..2^40 (corrupted header?)",
				    path, h.numel);
		if ((rc = check_size(path, TU_HDR_BYTES + 12 * h.numel, msg, len)))
			return rc;
		s->numel = h.numel;
		s->grad_covered = h.numel;
		s->grad_dtype = (enum tu_dtype)h.grad_dtype;
		s->nseg = 2;
		s->seg = calloc(2, sizeof(*s->seg));
		if (!s->seg || asprintf(&s->name, "sg-%05d", i) < 0)
			return fail(msg, len, -ENOMEM, "out of memory");
		s->hdr_off = 0;
		s->p_off = TU_HDR_BYTES;
		s->m_off = s->p_off + 4 * h.numel;
		s->v_off = s->m_off + 4 * h.numel;
		s->g_off = up(s->v_off + 4 * h.numel);
		s->buf_bytes = up(s->g_off + 2 * h.numel);
		s->seg[0] =
		    (struct tu_seg){strdup(path), TU_HDR_BYTES + 12 * h.numel, 0, 1, 0, NULL};
		if (asprintf(&s->seg[0].tmp_path, "%s.tmp", path) < 0)
			s->seg[0].tmp_path = NULL;
		snprintf(path, sizeof(path), "%s/sg-%05d.grad", dir, i);
		s->seg[1] = (struct tu_seg){strdup(path), 2 * h.numel, s->g_off, 0, 0, NULL};
		if (!s->seg[0].path || !s->seg[0].tmp_path || !s->seg[1].path)
			return fail(msg, len, -ENOMEM, "out of memory");
		if ((rc = check_size(path, 2 * h.numel, msg, len)))
			return rc;
		li->total_params += h.numel;
		if (s->buf_bytes > li->max_buf_bytes)
			li->max_buf_bytes = s->buf_bytes;
	}
	li->native_step = lo;
	return 0;
}

/* DeepSpeed file names, parsed. kind: 0 param, 1 exp_avg, 2 exp_avg_sq, 3 grad */
struct dsfile {
	uint64_t a, b, off, n;
	int kind;
	char *name;
};

static int parse_ds(const char *name, struct dsfile *f)
{
	int end = 0;
	unsigned long long a, b, off, n;
	const char *s = name;
	f->kind = 0;
	if (!strncmp(s, "exp_avg_sq-", 11)) {
		s += 11;
		f->kind = 2;
	} else if (!strncmp(s, "exp_avg-", 8)) {
		s += 8;
		f->kind = 1;
	}
	if (f->kind == 0 &&
	    sscanf(s, "%llu_%llu_gradient_%llu_%llu.tensor.swp%n", &a, &b, &off, &n, &end) == 4 &&
	    s[end] == 0) {
		*f = (struct dsfile){a, b, off, n, 3, NULL};
		return 0;
	}
	end = 0;
	if (sscanf(s, "%llu_%llu.tensor.swp%n", &a, &b, &end) == 2 && end && s[end] == 0) {
		f->a = a;
		f->b = b;
		return 0;
	}
	return -1;
}

static int cmp_ds(const void *x, const void *y)
{
	const struct dsfile *p = x, *q = y;
	if (p->a != q->a)
		return p->a < q->a ? -1 : 1;
	if (p->b != q->b)
		return p->b < q->b ? -1 : 1;
	if (p->kind != q->kind)
		return p->kind - q->kind;
	return p->off < q->off ? -1 : p->off > q->off;
}

/* Why a real DeepSpeed rank directory has gaps (checked against DeepSpeed
 * 0.19.8, optimizer_utils.py): a gradient tensor smaller than
 * max(1 MiB, aio block_size) is never swapped, and of a larger one only
 * its first numel rounded down to 256 elements is; the rest stays in
 * DeepSpeed's memory. The updater refuses such a sub-group rather than
 * update it with zeros for gradients it cannot see. */
#define DS_UNSWAPPED                                                                               \
	"DeepSpeed keeps gradients of tensors under 1 MiB, and the last (numel mod 256) "          \
	"elements of larger ones, in memory, not in swap files: the updater cannot update "        \
	"this sub-group from the files alone"

static int scan_deepspeed(const char *dir, int rank, struct tu_layout_info *li, char *msg,
			  size_t len)
{
	char rdir[4096], path[8192];
	snprintf(rdir, sizeof(rdir), "%s/zero_stage_3/optimizer/rank%d", dir, rank);
	DIR *d = opendir(rdir);
	if (!d)
		return fail(msg, len, -errno, "%s: %s", rdir, strerror(errno));
	struct dsfile *f = NULL;
	size_t nf = 0, cap = 0;
	int rc = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		struct dsfile x;
		if (parse_ds(de->d_name, &x))
			continue;
		if (nf == cap) {
			cap = cap ? 2 * cap : 64;
			struct dsfile *nfp = realloc(f, cap * sizeof(*f));
			if (!nfp) {
				rc = fail(msg, len, -ENOMEM, "out of memory listing %s", rdir);
				goto out;
			}
			f = nfp;
		}
		x.name = strdup(de->d_name);
		if (!x.name) {
			rc = fail(msg, len, -ENOMEM, "out of memory listing %s", rdir);
			goto out;
		}
		f[nf++] = x;
	}
	if (nf) /* qsort(NULL, 0, ...) is undefined */
		qsort(f, nf, sizeof(*f), cmp_ds);
	for (size_t i = 0; i < nf;) {
		size_t j = i;
		while (j < nf && f[j].a == f[i].a && f[j].b == f[i].b)
			j++;
		/* [i, j): one ds_id */
		struct tu_subgroup *s;
		struct tu_subgroup *ns = realloc(li->sub, (size_t)(li->nsub + 1) * sizeof(*s));
		if (!ns) {
			rc = fail(msg, len, -ENOMEM, "out of memory");
			goto out;
		}
		li->sub = ns;
		s = &li->sub[li->nsub++];
		memset(s, 0, sizeof(*s));
		if (asprintf(&s->name, "%" PRIu64 "_%" PRIu64, f[i].a, f[i].b) < 0) {
			s->name = NULL;
			rc = fail(msg, len, -ENOMEM, "out of memory");
			goto out;
		}
		static const char *pfx[] = {"", "exp_avg-", "exp_avg_sq-"};
		struct stat st;
		for (int k = 0; k < 3; k++) {
			if (i + (size_t)k >= j || f[i + k].kind != k) {
				snprintf(path, sizeof(path), "%s/%s%s.tensor.swp", rdir, pfx[k],
					 s->name);
				rc = fail(msg, len, -ENOENT, "%s: missing (sub-group %s)", path,
					  s->name);
				goto out;
			}
		}
		snprintf(path, sizeof(path), "%s/%s", rdir, f[i].name);
		if (stat(path, &st) < 0) {
			rc = fail(msg, len, -errno, "%s: %s", path, strerror(errno));
			goto out;
		}
		if (st.st_size == 0 || st.st_size % 4 || (uint64_t)st.st_size / 4 > TU_MAX_NUMEL) {
			rc = fail(msg, len, -EINVAL,
				  "%s: size %" PRIu64
				  " bytes, expected a non-zero multiple of 4 up to 2^42",
				  path, (uint64_t)st.st_size);
			goto out;
		}
		uint64_t n = (uint64_t)st.st_size / 4;
		s->numel = n;
		s->grad_dtype = TU_F32;
		s->p_off = 0;
		s->m_off = up(4 * n);
		s->v_off = s->m_off + up(4 * n);
		s->g_off = s->v_off + up(4 * n);
		s->hdr_off = UINT64_MAX;
		s->buf_bytes = s->g_off + up(4 * n);
		int ngrad = (int)(j - i - 3);
		if (ngrad <= 0) {
			rc = fail(msg, len, -ENOENT, "%s/%s_gradient_*: no gradient files", rdir,
				  s->name);
			goto out;
		}
		s->nseg = 3 + ngrad;
		s->seg = calloc((size_t)s->nseg, sizeof(*s->seg));
		if (!s->seg) {
			rc = fail(msg, len, -ENOMEM, "out of memory");
			goto out;
		}
		uint64_t offs[3] = {s->p_off, s->m_off, s->v_off};
		uint64_t covered = 0;
		for (int k = 0; k < s->nseg; k++) {
			struct dsfile *x = &f[i + (size_t)k];
			snprintf(path, sizeof(path), "%s/%s", rdir, x->name);
			uint64_t want = k < 3 ? 4 * n : 4 * x->n;
			if ((rc = check_size(path, want, msg, len)))
				goto out;
			if (k >= 3 && x->off < covered) {
				rc = fail(msg, len, -EINVAL,
					  "%s: gradient starts at element %" PRIu64
					  ", expected %" PRIu64 " (overlap in sub-group %s)",
					  path, x->off, covered, s->name);
				goto out;
			}
			if (k >= 3 && x->off > covered) {
				rc = fail(msg, len, -EINVAL,
					  "%s: gradient starts at element %" PRIu64
					  ", expected %" PRIu64 ": elements %" PRIu64 "-%" PRIu64
					  " of sub-group %s have no gradient file. " DS_UNSWAPPED,
					  path, x->off, covered, covered, x->off - 1, s->name);
				goto out;
			}
			if (k >= 3)
				covered += x->n;
			/* In place: DeepSpeed itself rewrites its swap files so. */
			s->seg[k] = (struct tu_seg){
			    strdup(path), want, k < 3 ? offs[k] : s->g_off + 4 * x->off,
			    k < 3,	  0,	NULL};
			if (!s->seg[k].path) {
				rc = fail(msg, len, -ENOMEM, "out of memory");
				goto out;
			}
		}
		/* padding up to 1024 bytes at the end has no gradient file */
		s->grad_covered = covered;
		if (covered > n || n - covered >= 256) {
			rc = fail(msg, len, -EINVAL,
				  "%s/%s_gradient_*: gradients cover %" PRIu64
				  " elements, expected %" PRIu64 ". %s",
				  rdir, s->name, covered, n, covered < n ? DS_UNSWAPPED : "");
			goto out;
		}
		li->total_params += n;
		if (s->buf_bytes > li->max_buf_bytes)
			li->max_buf_bytes = s->buf_bytes;
		i = j;
	}
	if (li->nsub == 0)
		rc = fail(msg, len, -ENOENT, "%s: no sub-group files (*.tensor.swp)", rdir);
out:
	for (size_t i = 0; i < nf; i++)
		free(f[i].name);
	free(f);
	closedir(d);
	return rc;
}

int tu_layout_scan(const char *dir, enum tu_layout layout, int rank, struct tu_layout_info *li,
		   char *msg, size_t msglen)
{
	memset(li, 0, sizeof(*li));
	int rc = layout == TU_LAYOUT_NATIVE ? scan_native(dir, li, msg, msglen)
					    : scan_deepspeed(dir, rank, li, msg, msglen);
	if (rc)
		tu_layout_free(li);
	return rc;
}

/* xorshift64*: reproducible synthetic data without libc's global state. */
static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ULL;
}

static float rng_unit(uint64_t *s) /* uniform in [-1, 1) */
{
	return (float)((double)(rng_next(s) >> 11) * 0x1p-52 - 1.0);
}

static int write_file(const char *path, const void *a, size_t na, const void *b, size_t nb,
		      char *msg, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return fail(msg, len, -errno, "%s: %s", path, strerror(errno));
	const void *part[2] = {a, b};
	size_t plen[2] = {na, nb};
	for (int k = 0; k < 2; k++) {
		const char *p = part[k];
		size_t left = plen[k];
		while (left) {
			ssize_t w = write(fd, p, left);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				int e = w < 0 ? errno : EIO;
				close(fd);
				return fail(msg, len, -e, "%s: write: %s", path, strerror(e));
			}
			p += w;
			left -= (size_t)w;
		}
	}
	if (close(fd) < 0)
		return fail(msg, len, -errno, "%s: close: %s", path, strerror(errno));
	return 0;
}

static int mkdir_p(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		int r = mkdir(path, 0755);
		*p = '/';
		if (r < 0 && errno != EEXIST)
			return -errno;
	}
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int tu_init_dir(const char *dir, enum tu_layout layout, uint64_t params, uint64_t subgroup,
		enum tu_dtype grad_dtype, int rank, uint64_t seed, char *msg, size_t len)
{
	if (params == 0 || subgroup == 0)
		return fail(msg, len, -EINVAL, "--params and --subgroup must be positive");
	if (grad_dtype != TU_BF16 && grad_dtype != TU_F16)
		return fail(msg, len, -EINVAL, "gradient dtype must be bf16 or fp16");
	if (subgroup > params)
		subgroup = params;
	uint64_t nsub = (params + subgroup - 1) / subgroup;
	char d[4096], path[8192];
	if (layout == TU_LAYOUT_DEEPSPEED)
		snprintf(d, sizeof(d), "%s/zero_stage_3/optimizer/rank%d", dir, rank);
	else
		snprintf(d, sizeof(d), "%s", dir);
	int rc = mkdir_p(d);
	if (rc)
		return fail(msg, len, rc, "%s: mkdir: %s", d, strerror(-rc));
	uint64_t st = seed * 0x9e3779b97f4a7c15ULL + 1;
	/* p, m, v, then gradients (fp32 for DeepSpeed, 16-bit for native) */
	float *buf = malloc(TU_HDR_BYTES + 16 * subgroup);
	if (!buf)
		return fail(msg, len, -ENOMEM, "out of memory for a sub-group of %" PRIu64,
			    subgroup);
	for (uint64_t i = 0; i < nsub && rc == 0; i++) {
		uint64_t first = i * subgroup;
		uint64_t n = first + subgroup <= params ? subgroup : params - first;
		struct tu_native_hdr *h = (struct tu_native_hdr *)buf;
		float *p = (float *)((char *)buf + TU_HDR_BYTES), *m = p + n, *v = m + n;
		float *g = v + n;
		memset(buf, 0, TU_HDR_BYTES);
		for (uint64_t k = 0; k < n; k++) {
			p[k] = rng_unit(&st);
			/* Non-zero moments exercise every term of the update. */
			m[k] = 0.01f * rng_unit(&st);
			float r = rng_unit(&st);
			v[k] = 1e-4f * r * r;
			g[k] = 0.05f * rng_unit(&st);
		}
		if (layout == TU_LAYOUT_NATIVE) {
			memcpy(h->magic, TU_NATIVE_MAGIC, 8);
			h->version = TU_NATIVE_VERSION;
			h->grad_dtype = grad_dtype;
			h->numel = n;
			h->index = i;
			h->nsub = nsub;
			h->first_param = first;
			uint16_t *g16 = (uint16_t *)g;
			for (uint64_t k = 0; k < n; k++)
				g16[k] = grad_dtype == TU_BF16 ? tu_f32_to_bf16(g[k])
							       : tu_f32_to_f16(g[k]);
			snprintf(path, sizeof(path), "%s/sg-%05" PRIu64 ".state", d, i);
			rc = write_file(path, buf, TU_HDR_BYTES + 12 * n, NULL, 0, msg, len);
			snprintf(path, sizeof(path), "%s/sg-%05" PRIu64 ".grad", d, i);
			if (!rc)
				rc = write_file(path, g16, 2 * n, NULL, 0, msg, len);
			continue;
		}
		/* DeepSpeed: three "tensors" per sub-group, so three gradient
		 * files; tensor boundaries on 1024 elements like DeepSpeed's
		 * alignment padding keeps them. */
		uint64_t t = n >= 3072 ? ((n / 3) & ~(uint64_t)1023) : n;
		uint64_t bounds[4] = {0, t, t < n ? 2 * t : n, n};
		if (bounds[2] > n)
			bounds[2] = n;
		uint64_t id0 = 3 * i, id1 = 3 * i + 2;
		const char *pfx[] = {"", "exp_avg-", "exp_avg_sq-"};
		float *arr[3] = {p, m, v};
		for (int k = 0; k < 3 && !rc; k++) {
			snprintf(path, sizeof(path), "%s/%s%" PRIu64 "_%" PRIu64 ".tensor.swp", d,
				 pfx[k], id0, id1);
			rc = write_file(path, arr[k], 4 * n, NULL, 0, msg, len);
		}
		for (int k = 0; k < 3 && !rc; k++) {
			uint64_t lo = bounds[k], hi = bounds[k + 1];
			if (hi <= lo)
				continue;
			snprintf(path, sizeof(path),
				 "%s/%" PRIu64 "_%" PRIu64 "_gradient_%" PRIu64 "_%" PRIu64
				 ".tensor.swp",
				 d, id0, id1, lo, hi - lo);
			rc = write_file(path, g + lo, 4 * (hi - lo), NULL, 0, msg, len);
		}
	}
	free(buf);
	return rc;
}
