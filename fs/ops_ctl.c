/*
 * fs/ops_ctl.c — the requests on the .tierfs control view (ctl.c says what
 * its nodes are and hold; this file answers FUSE with it).
 *
 * A write to the reload file reloads the config, and answers when done.
 * An open control file or directory: its bytes (the stats text, or a
 * directory's dirents) are built whole at open, like a real directory's
 * listing, so a reader sees one consistent snapshot. fi->fh is its handle
 * id (fs/handle.h: a RELEASE may arrive while a READ is being answered).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/handle.h"
#include "fs/ops.h"
#include "fs/reload.h"

struct ctl_handle {
	struct fh_node node;
	char *buf;
	size_t len, cap;
	unsigned n;
};

static void ctl_handle_destroy(struct fh_node *n)
{
	struct ctl_handle *h = fh_entry(n, struct ctl_handle, node);
	free(h->buf);
	free(h);
}

/* The open handle ID, referenced, or NULL (EBADF replied). */
static struct ctl_handle *ctl_handle_get(fuse_req_t req, uint64_t id)
{
	struct fh_node *n = fh_get(id);
	if (!n) {
		fuse_reply_err(req, EBADF);
		return NULL;
	}
	return fh_entry(n, struct ctl_handle, node);
}

void ops_ctl_lookup(fuse_req_t req, uint64_t parent, const char *name)
{
	struct fuse_entry_param e;
	int rc = ctl_lookup(g_fs, parent, name, &e);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_entry(req, &e);
}

void ops_ctl_getattr(fuse_req_t req, uint64_t ino)
{
	struct stat st;
	int rc = ctl_getattr(g_fs, ino, &st);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, 0);
}

/* A directory's listing being built: ctl_list's ADD. */
struct cd_list {
	fuse_req_t req;
	struct ctl_handle *d;
};

static int cd_add(void *arg, const char *name, uint64_t ino, mode_t mode)
{
	struct cd_list *l = arg;
	fuse_req_t req = l->req;
	struct ctl_handle *d = l->d;
	struct stat st = {.st_ino = ino, .st_mode = mode};
	size_t need = fuse_add_direntry(req, NULL, 0, name, NULL, 0);
	if (d->len + need > d->cap) {
		size_t nc = d->cap ? d->cap * 2 : 4096;
		while (nc < d->len + need)
			nc *= 2;
		char *nb = realloc(d->buf, nc);
		if (!nb)
			return -ENOMEM;
		d->buf = nb;
		d->cap = nc;
	}
	d->n++;
	d->len += fuse_add_direntry(req, d->buf + d->len, need, name, &st, (off_t)(d->len + need));
	return 0;
}

void ops_ctl_opendir(fuse_req_t req, uint64_t ino, struct fuse_file_info *fi)
{
	struct ctl_handle *d = calloc(1, sizeof(*d));
	struct cd_list l = {req, d};
	int rc = d ? ctl_list(g_fs, ino, cd_add, &l) : -ENOMEM;
	if (rc) {
		if (d)
			free(d->buf);
		free(d);
		fuse_reply_err(req, -rc);
		return;
	}
	fi->fh = fh_publish(&d->node, ctl_handle_destroy);
	if (fuse_reply_open(req, fi))
		fh_release(fi->fh);
}

void ops_ctl_readdir(fuse_req_t req, uint64_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	(void)ino;
	struct ctl_handle *d = ctl_handle_get(req, fi->fh);
	if (!d)
		return;
	/* Offsets are byte positions in the prebuilt buffer, each entry's
	 * that of the next; a reply holds only whole entries, so walk them
	 * from the start: a seekdir to any other byte (a user's lseek) starts
	 * at the next entry, never inside one. */
	struct dirent_head {
		uint64_t ino, off;
		uint32_t namelen, type;
	};
	size_t start = 0;
	while (start < d->len && start < (uint64_t)off) {
		const struct dirent_head *de = (const void *)(d->buf + start);
		start += (sizeof(*de) + de->namelen + 7) & ~(size_t)7;
	}
	size_t end = start;
	while (end < d->len) {
		const struct dirent_head *de = (const void *)(d->buf + end);
		size_t entlen = (sizeof(*de) + de->namelen + 7) & ~(size_t)7;
		if (end + entlen - start > size)
			break;
		end += entlen;
	}
	fuse_reply_buf(req, start < d->len ? d->buf + start : NULL, end - start);
	fh_put(&d->node);
}

void ops_ctl_open(fuse_req_t req, uint64_t ino, struct fuse_file_info *fi)
{
	char *text;
	size_t len;
	int rc = ctl_open(g_fs, ino, fi->flags, &text, &len);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	struct ctl_handle *f = calloc(1, sizeof(*f));
	if (!f) {
		free(text);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	f->buf = text;
	f->len = len;
	fi->fh = fh_publish(&f->node, ctl_handle_destroy);
	/* The size in stat is 0; direct_io makes read() go by our replies. */
	fi->direct_io = 1;
	if (fuse_reply_open(req, fi))
		fh_release(fi->fh);
}

void ops_ctl_read(fuse_req_t req, uint64_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)ino;
	struct ctl_handle *f = ctl_handle_get(req, fi->fh);
	if (!f)
		return;
	if ((size_t)off >= f->len) {
		fuse_reply_buf(req, NULL, 0);
	} else {
		size_t n = f->len - (size_t)off;
		fuse_reply_buf(req, f->buf + off, n < size ? n : size);
	}
	fh_put(&f->node);
}

/* A write to the reload file: "reload" (or "1"), a newline allowed. The
 * write returns once the reload is done; EINVAL when the config has an
 * error (the log says which), and then nothing changed. */
void ops_ctl_write(fuse_req_t req, uint64_t ino, const char *buf, size_t size)
{
	size_t n = size;
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		n--;
	if (ino != CTL_RELOAD) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (!((n == 6 && !memcmp(buf, "reload", 6)) || (n == 1 && buf[0] == '1'))) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	int rc = fs_reload(g_fs, "the control file");
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_write(req, size);
}

/* RELEASE and RELEASEDIR alike. */
void ops_ctl_release(fuse_req_t req, uint64_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	fh_release(fi->fh);
	fuse_reply_err(req, 0);
}
