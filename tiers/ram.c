/*
 * tiers/ram.c — the host RAM tier: one anonymous mapping of the whole
 * capacity. Slots are page-aligned slices of it, prefaulted at open because
 * the first touch of fresh anonymous pages costs more than the copy itself.
 * The cache uses the slots directly as its buffers (tier_ram_ptr).
 *
 * A page of headroom lies before each slot and after the last: the FUSE
 * loop reads a request into a free slot with its header in that page, so
 * the data of a whole-block write lands in the slot itself and the cache
 * takes the slot instead of copying the block (fs/loop.c).
 */
#include "tiers/backend.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

struct ram_tier {
	struct tier_mem mem; /* immutable after open */
	size_t len;
};

static int ram_open(struct tier *t, const struct tier_params *p)
{
	(void)p;
	struct ram_tier *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->len = (size_t)(t->slots_total * (t->block_size + TIER_RAM_HEADROOM) + TIER_RAM_HEADROOM);
	/* Huge pages cut TLB misses on multi-GiB caches and segments per
	 * O_DIRECT request; tier_mem_map advises them before the populate
	 * below, so the fault-in uses them. */
	int rc = tier_mem_map(&r->mem, r->len);
	if (rc) {
		tier_log(t, "cannot map %zu bytes of RAM: %s", r->len, strerror(-rc));
		free(r);
		return rc;
	}
	if (madvise(r->mem.base, r->len, MADV_POPULATE_WRITE)) {
		int e = errno;
		if (e == ENOMEM) {
			tier_log(t, "cannot prefault %zu bytes of RAM: %s", r->len, strerror(e));
			tier_mem_unmap(&r->mem);
			free(r);
			return -e;
		}
		/* Kernel older than 5.14: touch every page instead. */
		long pg = sysconf(_SC_PAGESIZE);
		for (size_t off = 0; off < r->len; off += (size_t)pg)
			r->mem.base[off] = 0;
	}
	t->be_priv = r;
	return 0;
}

static void ram_close(struct tier *t)
{
	struct ram_tier *r = t->be_priv;
	tier_mem_unmap(&r->mem);
	free(r);
}

static char *slot_ptr(const struct ram_tier *r, const struct tier *t, uint64_t slot)
{
	return r->mem.base + TIER_RAM_HEADROOM + slot * (t->block_size + TIER_RAM_HEADROOM);
}

static int ram_submit(struct tier *t, struct tier_io *io)
{
	struct ram_tier *r = t->be_priv;
	char *slot = slot_ptr(r, t, io->slot);
	/* The cache often hands us the slot's own memory: nothing to move. */
	if (io->buf != slot) {
		if (io->op == TIER_OP_WRITE)
			memcpy(slot, io->buf, io->len);
		else
			memcpy(io->buf, slot, io->len);
	}
	tier_io_complete(io, 0);
	return 0;
}

static int ram_sync(struct tier *t)
{
	(void)t;
	return 0;
}

const struct tier_backend tier_ram_backend = {
    .kind_name = "ram",
    .open = ram_open,
    .close = ram_close,
    .submit = ram_submit,
    .sync = ram_sync,
};

void *tier_ram_ptr(struct tier *t, uint64_t slot)
{
	if (t->kind != TIER_RAM || slot >= t->slots_total)
		return NULL;
	return slot_ptr(t->be_priv, t, slot);
}
