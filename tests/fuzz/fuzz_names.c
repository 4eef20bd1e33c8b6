/*
 * tests/fuzz/fuzz_names.c — file names and paths from arbitrary bytes:
 * the namespace tables, the control view's lookups and the placement
 * rules' globs.
 *
 * The kernel hands a FUSE daemon any name of up to 1024 bytes without '/'
 * or NUL (longer ones it refuses itself). A name tierfs accepts must be
 * stored and found again exactly; one it cannot store must get
 * ENAMETOOLONG, not another error or a crash; looking a name up in the
 * control view must answer, whatever the name.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "fs/fs.h"
#include "fs/meta.h"
#include "policy/placement.h"
#include "tests/fuzz/fsbox.h"
#include "tests/fuzz/fuzz.h"

/* FUSE_NAME_MAX: the longest name the kernel sends. */
#define KERNEL_NAME_MAX 1024

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fsbox_get();
	return 0;
}

struct seen {
	const char *name;
	uint64_t ino;
	bool found;
};

static int find_cb(const char *name, uint64_t ino, void *arg)
{
	struct seen *s = arg;
	if (!strcmp(name, s->name)) {
		s->found = true;
		s->ino = ino;
	}
	return 0;
}

/* Store, find, list and drop NAME in a transaction that is then thrown
 * away, as create, lookup, readdir and unlink use the tables. */
static void check_dirent(struct fs *fs, uint64_t dir, uint64_t ino, const char *name)
{
	struct meta_txn *t;
	if (meta_txn_begin(fs->meta, true, &t))
		return;
	size_t len = strlen(name);
	int rc = meta_dirent_put(t, dir, name, ino);
	if (len > NAME_MAX) {
		FUZZ_CHECK(rc == -ENAMETOOLONG);
		uint64_t got;
		FUZZ_CHECK(meta_dirent_get(t, dir, name, &got) == -ENAMETOOLONG);
		meta_txn_abort(t);
		return;
	}
	FUZZ_CHECK(rc == 0);
	uint64_t got = 0;
	FUZZ_CHECK(meta_dirent_get(t, dir, name, &got) == 0 && got == ino);
	struct seen s = {.name = name};
	FUZZ_CHECK(meta_dir_iter(t, dir, find_cb, &s) == 0 && s.found && s.ino == ino);
	FUZZ_CHECK(meta_dirent_del(t, dir, name) == 0);
	FUZZ_CHECK(meta_dirent_get(t, dir, name, &got) == -ENOENT);
	meta_txn_abort(t);
}

static void check_ctl(struct fs *fs, const char *name)
{
	struct fuse_entry_param e;
	int rc = ctl_lookup(fs, CTL_DIR, name, &e);
	FUZZ_CHECK(rc <= 0);
	rc = ctl_lookup(fs, CTL_TIERS, name, &e);
	FUZZ_CHECK(rc <= 0);
	if (!rc)
		FUZZ_CHECK(config_tier_index(&fs->conf, name) >= 0);
	/* Through a tier's view of the root: only names the tree has. */
	if (ctl_lookup(fs, CTL_TIERS, "disk", &e) == 0) {
		uint64_t view = e.ino;
		rc = ctl_lookup(fs, view, name, &e);
		FUZZ_CHECK(rc <= 0);
		if (!rc)
			FUZZ_CHECK(!strcmp(name, "file") || !strcmp(name, "dir"));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fsbox *box = fsbox_get();
	struct fs *fs = box->fs;
	if (size == 0 || size > KERNEL_NAME_MAX || memchr(data, '/', size) ||
	    memchr(data, '\0', size))
		return 0; /* names the kernel never sends */
	char name[KERNEL_NAME_MAX + 1];
	memcpy(name, data, size);
	name[size] = '\0';

	check_dirent(fs, box->dir, box->file, name);
	check_ctl(fs, name);

	/* A new file's path meets the rules' globs, at the root and deeper. */
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "/%s", name);
	int r = placement_rule_for(&fs->conf, path);
	FUZZ_CHECK(r >= -1 && r < fs->conf.nrules);
	snprintf(path, sizeof(path), "/ckpt%s/%s.pt", name, name);
	r = placement_rule_for(&fs->conf, path);
	FUZZ_CHECK(r >= -1 && r < fs->conf.nrules);

	struct meta_inode a;
	memset(&a, 0, sizeof(a));
	fs_name_id_set(&a, box->dir, name);
	return 0;
}
