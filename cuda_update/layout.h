/*
 * cuda_update/layout.h — internal: how a directory's files map onto sub-groups
 * (DeepSpeed's swap layout or the native one), shared by layout.c (discovery,
 * validation, synthetic init) and pipeline_io.c (the I/O).
 *
 * Native layout (one directory, written by `tierfs-update init`):
 *   sg-NNNNN.state  header (4096 B, struct tu_native_hdr) then param, exp_avg,
 *                   exp_avg_sq, each numel fp32; size exactly 4096 + 12*numel.
 *                   The header carries magic, version, numel, the number of
 *                   steps applied (so bias correction survives restarts), the
 *                   sub-group index and count.
 *                   The updater writes sg-NNNNN.state.tmp, syncs it and
 *                   renames it over sg-NNNNN.state: a crash leaves each
 *                   sub-group whole at the old step or at the new one.
 *   sg-NNNNN.grad   numel gradients in bf16 or fp16 (header's grad_dtype),
 *                   size exactly 2*numel; read-only for the updater.
 *   sg-NNNNN.param16  optional output (--param-copy): the updated params in
 *                   bf16 or fp16, 2*numel bytes, written after every update.
 * DeepSpeed layout: DIR/zero_stage_3/optimizer/rankR/{id}.tensor.swp,
 *   exp_avg-{id}.tensor.swp, exp_avg_sq-{id}.tensor.swp (numel*4 B each) and
 *   {id}_gradient_{offset}_{numel}.tensor.swp (fp32) tiling [0, numel), or
 *   stopping short of numel by less than 256 elements (DeepSpeed's 1024-byte
 *   padding of the swap files; those elements get zero gradients).
 */
#ifndef TIERFS_UPDATE_LAYOUT_H
#define TIERFS_UPDATE_LAYOUT_H

#include "cuda_update/tierfs_update.h"

#include <stdint.h>

#define TU_NATIVE_MAGIC	  "TFSUPDv1"
#define TU_NATIVE_VERSION 1
#define TU_HDR_BYTES	  4096
#define TU_ALIGN	  4096
/* Largest sub-group accepted (2^40 params, a 12 TiB state file): far beyond
 * any real one, small enough that every size derived from numel (12*numel
 * plus headers and alignment) stays far from 64-bit overflow, so a corrupted
 * header is reported instead of wrapping around to a size that matches. */
#define TU_MAX_NUMEL (UINT64_C(1) << 40)

struct tu_native_hdr {
	char magic[8];
	uint32_t version;
	uint32_t grad_dtype; /* enum tu_dtype */
	uint64_t numel;
	uint64_t step; /* steps applied so far; the next update uses step+1 */
	uint64_t index;
	uint64_t nsub;
	uint64_t first_param; /* global index of this sub-group's first param */
};

/* One file region of a sub-group, loaded into the slot buffer at buf_off. */
struct tu_seg {
	char *path;
	uint64_t bytes;
	uint64_t buf_off; /* TU_ALIGN aligned for the first segment of each array */
	int write_back;	  /* state is written back; gradients are not */
	int no_read;	  /* output only (the half-precision param copy) */
	/* NULL: written in place. Otherwise the write-back goes to this file,
	 * which is synced and renamed over path, so that a crash leaves either
	 * the old or the new file, never a mix (native sg-NNNNN.state). */
	char *tmp_path;
};

struct tu_subgroup {
	uint64_t numel;
	int nseg;
	struct tu_seg *seg;
	/* Offsets of the arrays inside the slot buffer. */
	uint64_t p_off, m_off, v_off, g_off, hdr_off, copy_off;
	enum tu_dtype grad_dtype;
	/* DeepSpeed pads its swap files to 1024 bytes: gradients may stop short
	 * of numel; the tail [grad_covered, numel) gets zero gradients. */
	uint64_t grad_covered;
	uint64_t buf_bytes;
	char *name;	   /* for messages: ds_id or sg-NNNNN */
	uint64_t hdr_step; /* native: steps its header says were applied */
};

struct tu_layout_info {
	int nsub;
	struct tu_subgroup *sub;
	uint64_t total_params;
	uint64_t max_buf_bytes;
	/* native: steps applied to every sub-group. An interrupted run may
	 * have taken some one step further (hdr_step): the next run resumes,
	 * applying that step to the others only. */
	uint64_t native_step;
};

/* Fill *li from dir; msg gets a message naming the file on error. */
int tu_layout_scan(const char *dir, enum tu_layout layout, int rank, struct tu_layout_info *li,
		   char *msg, size_t msglen);
void tu_layout_free(struct tu_layout_info *li);

#endif
