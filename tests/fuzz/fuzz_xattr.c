/*
 * tests/fuzz/fuzz_xattr.c — extended attributes: names and values from
 * arbitrary bytes, on a file, a directory and the control view.
 *
 * The kernel passes any name of up to 255 bytes without a NUL and any
 * value of up to 64 KiB to setxattr; tierfs parses some of them (the pin's
 * tier name) and stores the rest. Input layout: one byte choosing the
 * operation and target, a name up to the first NUL, the value after it.
 * Besides not crashing, what is stored must read back as stored and go
 * when removed, and the computed attributes must refuse to be written.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "fs/fs.h"
#include "fs/strbuf.h"
#include "tests/fuzz/fsbox.h"
#include "tests/fuzz/fuzz.h"

/* What the kernel lets through (XATTR_NAME_MAX, XATTR_SIZE_MAX). */
#define NAME_LIMIT  255
#define VALUE_LIMIT 65536

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fsbox_get();
	return 0;
}

static bool computed(const char *name)
{
	return !strncmp(name, "user.tierfs.", 12);
}

static void check_set_get(struct fs *fs, uint64_t ino, const char *name, const char *value,
			  size_t vlen, int flags)
{
	int rc = xattr_set(fs, ino, name, value, vlen, flags);
	if (computed(name)) {
		if (strcmp(name, "user.tierfs.pin"))
			FUZZ_CHECK(rc == -EPERM);
		return;
	}
	FUZZ_CHECK(rc == 0 || rc == -EEXIST || rc == -ENODATA || rc == -ENAMETOOLONG ||
		   rc == -EINVAL || rc == -E2BIG || rc == -ENOSPC);
	if (rc)
		return;
	struct strbuf s = {0};
	rc = xattr_get(fs, ino, name, &s);
	FUZZ_CHECK(rc == 0 && s.len == vlen && (vlen == 0 || !memcmp(s.p, value, vlen)));
	free(s.p);
	/* Listed by name, as getfattr -d finds it. */
	struct strbuf l = {0};
	FUZZ_CHECK(xattr_list(fs, ino, &l) == 0);
	bool found = false;
	for (size_t off = 0; off < l.len; off += strlen(l.p + off) + 1)
		found |= !strcmp(l.p + off, name);
	free(l.p);
	FUZZ_CHECK(found);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fsbox *box = fsbox_get();
	struct fs *fs = box->fs;
	if (size < 1)
		return 0;
	uint8_t op = data[0];
	const char *rest = (const char *)data + 1;
	size_t rlen = size - 1;
	const char *nul = memchr(rest, '\0', rlen);
	size_t nlen = nul ? (size_t)(nul - rest) : rlen;
	if (nlen > NAME_LIMIT || nlen == 0)
		return 0; /* the kernel refuses these before we see them */
	char name[NAME_LIMIT + 1];
	memcpy(name, rest, nlen);
	name[nlen] = '\0';
	const char *value = nul ? nul + 1 : rest + rlen;
	size_t vlen = nul ? rlen - nlen - 1 : 0;
	if (vlen > VALUE_LIMIT)
		vlen = VALUE_LIMIT;

	static const uint64_t targets[] = {0, 0, META_ROOT_INO, CTL_STATS, CTL_DIR};
	uint64_t ino;
	switch ((op >> 4) % 5) {
	case 0:
	case 1:
		ino = box->file;
		break;
	case 3:
	case 4:
		ino = targets[(op >> 4) % 5];
		break;
	default:
		ino = box->dir;
		break;
	}
	int flags = (op & 0x8) ? XATTR_CREATE : (op & 0x4) ? XATTR_REPLACE : 0;
	struct strbuf s = {0};
	int rc;
	switch (op & 0x3) {
	case 0:
		if (ctl_ino(ino)) {
			FUZZ_CHECK(xattr_set(fs, ino, name, value, vlen, flags) < 0);
			break;
		}
		check_set_get(fs, ino, name, value, vlen, flags);
		break;
	case 1:
		rc = xattr_get(fs, ino, name, &s);
		FUZZ_CHECK(rc <= 0);
		break;
	case 2:
		rc = xattr_remove(fs, ino, name);
		FUZZ_CHECK(rc <= 0);
		if (!rc && !computed(name)) {
			rc = xattr_get(fs, ino, name, &s);
			FUZZ_CHECK(rc == -ENODATA);
		}
		break;
	default:
		/* The pin takes a tier name; an empty value unpins. */
		rc = xattr_set(fs, ino, "user.tierfs.pin", value, vlen, 0);
		FUZZ_CHECK(rc <= 0);
		if (!rc && vlen && ino == box->file) {
			rc = xattr_get(fs, ino, "user.tierfs.pin", &s);
			FUZZ_CHECK(rc == 0 && s.len == vlen && !memcmp(s.p, value, vlen));
		}
		break;
	}
	free(s.p);
	return 0;
}
