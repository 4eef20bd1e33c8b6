/*
 * fs/handle.h — file handles (fi->fh) for state the daemon allocates per
 * open: directory snapshots, the control view's texts.
 *
 * The kernel can deliver RELEASE while a READ or READDIR of the same handle
 * is still being answered (a reader interrupted, or one that exits as soon
 * as it has what it wants; ASan caught a reply copying from a buffer that
 * release had freed). So fi->fh is an id, not a pointer: a reply looks the
 * handle up and holds a reference while it copies, and whichever of release
 * and reply ends last destroys it. A request after the release finds
 * nothing (EBADF to the caller).
 *
 * Embed a struct fh_node in the per-open state; the destroy callback frees
 * the whole object (fh_entry).
 */
#ifndef TIERFS_HANDLE_H
#define TIERFS_HANDLE_H

#include <stddef.h>
#include <stdint.h>

/* The object of TYPE whose fh_node MEMBER is PTR. */
#define fh_entry(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

struct fh_node {
	uint64_t id;
	int refs; /* the open handle + replies under way; guarded by the table lock */
	void (*destroy)(struct fh_node *);
	struct fh_node *next; /* hash chain, until release */
};

/* Make N findable; returns its id for fi->fh (never 0). N holds the open
 * handle's reference until fh_release. */
uint64_t fh_publish(struct fh_node *n, void (*destroy)(struct fh_node *));
/* A reference to open handle ID, or NULL once it is released. */
struct fh_node *fh_get(uint64_t id);
void fh_put(struct fh_node *n);
/* RELEASE of ID: no later fh_get finds it; destroyed when no reply holds it. */
void fh_release(uint64_t id);

#endif
