#!/usr/bin/env python3
"""POSIX behaviour checks for tierfs, runnable on any directory.

    posix_check.py DIR [CHECK...]

Runs each check in a fresh subdirectory of DIR and prints one line per check:
    NAME <TAB> pass|fail <TAB> OBSERVED
OBSERVED is what the filesystem did (errno names, sizes), so t_posix.sh can
run the same checks on a plain directory (ext4 on the host) and on the mount
and require both to pass and to behave alike. Standard library only.
"""
import errno
import hashlib
import mmap
import os
import stat
import sys
import time

MiB = 1 << 20


class Fail(Exception):
    pass


def expect(cond, msg):
    if not cond:
        raise Fail(msg)


def err_name(fn, *a):
    """Run fn; return 'ok' or the errno name it raised."""
    try:
        fn(*a)
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def rnd(n, seed):
    out = bytearray()
    h = hashlib.sha256(str(seed).encode()).digest()
    while len(out) < n:
        h = hashlib.sha256(h).digest()
        out += h
    return bytes(out[:n])


def wfile(p, data, flags=0):
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | flags, 0o644)
    try:
        n = 0
        while n < len(data):
            n += os.write(fd, data[n:])
    finally:
        os.close(fd)


def rfile(p):
    with open(p, "rb") as f:
        return f.read()


def pread_all(fd, n, off):
    out = bytearray()
    while len(out) < n:
        b = os.pread(fd, n - len(out), off + len(out))
        if not b:
            break
        out += b
    return bytes(out)


# ---------------------------------------------------------------- checks


def c_create_excl(d):
    p = d + "/f"
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    e = err_name(os.open, p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    expect(e == "EEXIST", "second O_EXCL create gave %s" % e)
    e2 = err_name(os.open, d + "/missing", os.O_RDONLY)
    expect(e2 == "ENOENT", "open missing gave %s" % e2)
    expect(stat.S_IMODE(os.stat(p).st_mode) == 0o600, "mode not 0600")
    return "excl=%s missing=%s" % (e, e2)


def c_trunc(d):
    p = d + "/f"
    wfile(p, rnd(3 * MiB + 17, 1))
    fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
    expect(os.fstat(fd).st_size == 0, "O_TRUNC left size %d" % os.fstat(fd).st_size)
    os.write(fd, b"abc")
    os.close(fd)
    expect(rfile(p) == b"abc", "content after O_TRUNC+write wrong")
    return "size=%d" % os.stat(p).st_size


def c_append(d):
    p = d + "/f"
    wfile(p, b"0123456789")
    fd = os.open(p, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"abc")
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, b"def")  # O_APPEND: still at the end
    os.close(fd)
    got = rfile(p)
    expect(got == b"0123456789abcdef", "append gave %r" % got)
    return "content=%s" % got.decode()


def _aligned(n):
    m = mmap.mmap(-1, n)
    return m


def c_odirect(d):
    p = d + "/f"
    data = rnd(2 * MiB + 8192, 2)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o600)
    buf = _aligned(len(data))
    buf[:] = data
    n = os.pwrite(fd, buf, 0)
    expect(n == len(data), "O_DIRECT write short: %d" % n)
    # unaligned O_DIRECT: allowed or EINVAL, whatever the kernel does;
    # the observation is compared with the plain directory
    un = err_name(os.pwrite, fd, b"xyz", 5)
    os.close(fd)
    fd = os.open(p, os.O_RDONLY | os.O_DIRECT)
    rb = _aligned(len(data))
    n = os.preadv(fd, [rb], 0)
    os.close(fd)
    expect(n == len(data), "O_DIRECT read short: %d" % n)
    want = bytearray(data)
    if un == "ok":
        want[5:8] = b"xyz"
    expect(bytes(rb[:n]) == bytes(want), "O_DIRECT read back differs")
    expect(os.stat(p).st_size == len(data), "size %d" % os.stat(p).st_size)
    # unaligned O_DIRECT may succeed on FUSE (direct_io) and fail on ext4:
    # both are allowed, so it is not part of the observation
    return "ok"


def c_odd_offsets(d):
    p = d + "/f"
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    shadow = bytearray()
    for i, (off, ln) in enumerate([(1, 1), (4095, 2), (MiB - 1, 3), (MiB - 5, 10), (3 * MiB + 7, 70000),
                                   (2 * MiB - 4096, 8193), (12345, MiB + 3), (0, 1)]):
        data = rnd(ln, 100 + i)
        os.pwrite(fd, data, off)
        if len(shadow) < off + ln:
            shadow += bytes(off + ln - len(shadow))
        shadow[off:off + ln] = data
    for off, ln in [(0, len(shadow)), (MiB - 7, 20), (3 * MiB, 9), (len(shadow) - 3, 100)]:
        got = pread_all(fd, ln, off)
        expect(got == bytes(shadow[off:off + ln]), "pread(%d,%d) mismatch" % (off, ln))
    expect(os.fstat(fd).st_size == len(shadow), "size %d != %d" % (os.fstat(fd).st_size, len(shadow)))
    os.close(fd)
    return "size=%d" % len(shadow)


def c_sparse(d):
    p = d + "/f"
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    os.pwrite(fd, b"Z", 5 * MiB + 3)
    os.pwrite(fd, b"A", 100)
    st = os.fstat(fd)
    expect(st.st_size == 5 * MiB + 4, "size %d" % st.st_size)
    got = pread_all(fd, 5 * MiB + 4, 0)
    want = bytearray(5 * MiB + 4)
    want[100] = ord("A")
    want[-1] = ord("Z")
    expect(got == bytes(want), "hole not zeros")
    os.close(fd)
    # a file that is all hole
    fd = os.open(d + "/g", os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, 3 * MiB)
    expect(pread_all(fd, 3 * MiB, 0) == bytes(3 * MiB), "truncated-up file not zeros")
    os.close(fd)
    return "size=%d" % st.st_size


def c_truncate(d):
    p = d + "/f"
    data = rnd(3 * MiB, 3)
    wfile(p, data)
    os.truncate(p, MiB + 5)
    expect(os.stat(p).st_size == MiB + 5, "truncate down size")
    fd = os.open(p, os.O_RDWR)
    os.ftruncate(fd, 3 * MiB)
    got = pread_all(fd, 3 * MiB, 0)
    expect(got[:MiB + 5] == data[:MiB + 5], "data before cut changed")
    expect(got[MiB + 5:] == bytes(3 * MiB - MiB - 5), "data beyond cut not zero after growing")
    os.ftruncate(fd, 0)
    expect(os.fstat(fd).st_size == 0 and pread_all(fd, 10, 0) == b"", "truncate to 0")
    os.ftruncate(fd, 4096)
    expect(pread_all(fd, 4096, 0) == bytes(4096), "regrown after 0 not zero")
    os.close(fd)
    return "ok"


def c_unlink_open(d):
    p = d + "/f"
    data = rnd(MiB + 333, 4)
    wfile(p, data)
    fd = os.open(p, os.O_RDWR)
    os.unlink(p)
    expect("f" not in os.listdir(d), "unlinked name still listed")
    e = err_name(os.stat, p)
    expect(e == "ENOENT", "stat after unlink: %s" % e)
    expect(pread_all(fd, len(data), 0) == data, "data not readable through fd after unlink")
    os.pwrite(fd, b"more", len(data))
    expect(pread_all(fd, 4, len(data)) == b"more", "write after unlink")
    nl = os.fstat(fd).st_nlink
    os.close(fd)
    # a new file of the same name is a different, empty file
    wfile(p, b"")
    expect(os.stat(p).st_size == 0, "recreated file not empty")
    return "stat=%s nlink=%d" % (e, nl)


def c_rename(d):
    os.mkdir(d + "/d1")
    os.mkdir(d + "/d2")
    wfile(d + "/a", b"AAAA")
    wfile(d + "/b", b"BBBBBBBB")
    os.rename(d + "/a", d + "/b")
    expect(rfile(d + "/b") == b"AAAA", "rename over existing: wrong content")
    expect(not os.path.exists(d + "/a"), "old name still there")
    wfile(d + "/d1/x", rnd(MiB + 1, 5))
    os.rename(d + "/d1/x", d + "/d2/y")
    expect(rfile(d + "/d2/y") == rnd(MiB + 1, 5), "rename across dirs content")
    expect(os.listdir(d + "/d1") == [] and os.listdir(d + "/d2") == ["y"], "dir listings after rename")
    os.rename(d + "/d2", d + "/d1/sub")  # directory move
    expect(rfile(d + "/d1/sub/y") == rnd(MiB + 1, 5), "moved dir content")
    # open fd survives rename
    fd = os.open(d + "/b", os.O_RDONLY)
    os.rename(d + "/b", d + "/d1/c")
    expect(os.read(fd, 10) == b"AAAA", "fd after rename")
    os.close(fd)
    os.mkdir(d + "/e")
    wfile(d + "/e/z", b"z")
    e1 = err_name(os.rename, d + "/d1", d + "/e")  # over non-empty dir
    e2 = err_name(os.rename, d + "/missing", d + "/q")
    expect(e1 in ("ENOTEMPTY", "EEXIST"), "rename over non-empty dir: %s" % e1)
    expect(e2 == "ENOENT", "rename missing: %s" % e2)
    return "over_nonempty=%s missing=%s" % (e1, e2)


def c_dirs(d):
    os.mkdir(d + "/x")
    e1 = err_name(os.mkdir, d + "/x")
    wfile(d + "/x/f", b"1")
    e2 = err_name(os.rmdir, d + "/x")
    e3 = err_name(os.rmdir, d + "/x/f")
    e4 = err_name(os.unlink, d + "/x")
    os.makedirs(d + "/p/q/r")
    st = os.stat(d + "/p")
    os.unlink(d + "/x/f")
    os.rmdir(d + "/x")
    expect(not os.path.exists(d + "/x"), "rmdir empty failed")
    expect(e1 == "EEXIST" and e2 == "ENOTEMPTY" and e3 == "ENOTDIR" and e4 in ("EISDIR", "EPERM"),
           "errnos %s %s %s %s" % (e1, e2, e3, e4))
    return "mkdir_again=%s rmdir_nonempty=%s rmdir_file=%s unlink_dir=%s nlink_p=%d" % (e1, e2, e3, e4, st.st_nlink)


def c_readdir_many(d):
    n = 2000
    names = ["entry-%05d-%s" % (i, "x" * (i % 37)) for i in range(n)]
    for nm in names:
        fd = os.open(d + "/" + nm, os.O_WRONLY | os.O_CREAT, 0o644)
        os.close(fd)
    got = os.listdir(d)
    expect(len(got) == n, "listed %d of %d" % (len(got), n))
    expect(len(set(got)) == n, "duplicates in listing")
    expect(sorted(got) == sorted(names), "names differ")
    with os.scandir(d) as it:
        cnt = sum(1 for e in it if e.is_file())
    expect(cnt == n, "scandir is_file count %d" % cnt)
    for nm in names[::2]:
        os.unlink(d + "/" + nm)
    got = os.listdir(d)
    expect(sorted(got) == sorted(names[1::2]), "listing after deleting half")
    return "n=%d" % len(got)


def c_rewinddir(d):
    # A rewound directory stream shows the directory as it is now.
    wfile(d + "/old", b"o")
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        first = sorted(os.listdir(fd))
        wfile(d + "/new", b"n")
        os.unlink(d + "/old")
        second = sorted(os.listdir(fd))  # listdir(fd) rewinds the stream
    finally:
        os.close(fd)
    expect(first == ["old"] and second == ["new"], "first %s, after rewind %s" % (first, second))
    return "first=%s rewound=%s" % (first, second)


def c_trunc_empty_times(d):
    # O_TRUNC of an empty file still sets its mtime.
    wfile(d + "/e", b"")
    os.utime(d + "/e", (1000000000, 1000000000))
    os.close(os.open(d + "/e", os.O_WRONLY | os.O_TRUNC))
    moved = os.stat(d + "/e").st_mtime > 1000000000
    expect(moved, "mtime unchanged by O_TRUNC of an empty file")
    return "mtime_set=%s" % moved


def c_attrs(d):
    p = d + "/f"
    wfile(p, b"x")
    os.chmod(p, 0o640)
    e_ch = err_name(os.chown, p, 1234, 5678)
    os.utime(p, ns=(1500000000123456789, 1600000000987654321))
    st = os.stat(p)
    expect(stat.S_IMODE(st.st_mode) == 0o640, "mode %o" % stat.S_IMODE(st.st_mode))
    expect(e_ch != "ok" or (st.st_uid, st.st_gid) == (1234, 5678), "owner %d:%d" % (st.st_uid, st.st_gid))
    expect(int(st.st_mtime) == 1600000000 and int(st.st_atime) == 1500000000,
           "times %r %r" % (st.st_atime, st.st_mtime))
    os.chmod(p, 0o4755)
    m2 = stat.S_IMODE(os.stat(p).st_mode)
    os.mkdir(d + "/dd", 0o700)
    os.chmod(d + "/dd", 0o1777)
    m3 = stat.S_IMODE(os.stat(d + "/dd").st_mode)
    # mtime moves forward on write
    before = os.stat(p).st_mtime
    time.sleep(0.01)
    wfile(p, b"y")
    expect(os.stat(p).st_mtime > before, "mtime not updated by write")
    return "chown=%s mode2=%o dirmode=%o mtime_ns_ok=%s" % (e_ch, m2, m3, st.st_mtime_ns % 10**9 == 987654321)


def c_symlink(d):
    wfile(d + "/target", b"T")
    os.symlink("target", d + "/l1")
    os.symlink("/nonexistent/dangling", d + "/l2")
    expect(os.readlink(d + "/l1") == "target", "readlink")
    expect(os.readlink(d + "/l2") == "/nonexistent/dangling", "readlink dangling")
    expect(stat.S_ISLNK(os.lstat(d + "/l1").st_mode), "lstat not a link")
    expect(rfile(d + "/l1") == b"T", "read through link")
    e = err_name(os.stat, d + "/l2")
    e2 = err_name(os.symlink, "x", d + "/l1")
    e3 = err_name(os.readlink, d + "/target")
    expect(e == "ENOENT" and e2 == "EEXIST" and e3 == "EINVAL", "errnos %s %s %s" % (e, e2, e3))
    os.unlink(d + "/l1")
    expect(os.path.exists(d + "/target"), "unlink of link removed target")
    return "dangling=%s again=%s readlink_file=%s" % (e, e2, e3)


def c_statfs(d):
    s = os.statvfs(d)
    expect(s.f_blocks * s.f_frsize > 0, "statfs size 0")
    expect(s.f_bavail <= s.f_blocks and s.f_bfree <= s.f_blocks, "free > total")
    return "ok"


def c_sync(d):
    p = d + "/f"
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    os.write(fd, rnd(2 * MiB + 1, 6))
    os.fsync(fd)
    os.fdatasync(fd)
    os.close(fd)
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    e = err_name(os.fsync, fd)
    os.close(fd)
    return "dirfsync=%s" % e


def c_fallocate(d):
    p = d + "/f"
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    os.write(fd, b"head")
    os.posix_fallocate(fd, 0, 3 * MiB + 100)
    expect(os.fstat(fd).st_size == 3 * MiB + 100, "fallocate size %d" % os.fstat(fd).st_size)
    got = pread_all(fd, 3 * MiB + 100, 0)
    expect(got[:4] == b"head" and got[4:] == bytes(3 * MiB + 96), "fallocate content")
    os.posix_fallocate(fd, 0, 10)  # inside: no size change
    expect(os.fstat(fd).st_size == 3 * MiB + 100, "fallocate inside changed size")
    os.close(fd)
    return "ok"


def fallocate(fd, mode, off, length):
    """fallocate(2) through libc (os has only posix_fallocate)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    if libc.fallocate(fd, mode, off, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def c_punch_zero(d):
    # Punched and zeroed ranges at odd offsets, across and inside blocks
    # and past EOF: the bytes and the size, as ext4 has them.
    KEEP, PUNCH, ZERO = 0x01, 0x02, 0x10
    p = d + "/f"
    data = bytes((i * 7 + i // 4099) & 0xFF for i in range(5 * MiB + 300))
    wfile(p, data)
    fd = os.open(p, os.O_RDWR)
    obs = []
    for mode, off, n in [(PUNCH | KEEP, 100, 3 * MiB), (PUNCH | KEEP, 4 * MiB + 5, 7),
                         (ZERO | KEEP, MiB - 1, 2), (ZERO, 5 * MiB, MiB // 2),
                         (ZERO | KEEP, 6 * MiB, MiB), (PUNCH | KEEP, 5 * MiB + 200, 2 * MiB)]:
        fallocate(fd, mode, off, n)
        size = os.fstat(fd).st_size
        obs.append("%x@%d+%d:%d:%s" % (mode, off, n, size,
                                       hashlib.sha1(pread_all(fd, size, 0)).hexdigest()[:8]))
    want = bytearray(data)
    want[100:100 + 3 * MiB] = bytes(3 * MiB)
    want[4 * MiB + 5:4 * MiB + 12] = bytes(7)
    want[MiB - 1:MiB + 1] = bytes(2)
    want[5 * MiB:] = bytes(MiB // 2)
    want[5 * MiB + 200:] = bytes(len(want) - 5 * MiB - 200)
    expect(pread_all(fd, len(want) + 1, 0) == bytes(want), "bytes after punch/zero differ")
    obs.append("nokeep=" + err_name(fallocate, fd, PUNCH, 0, 4096))
    os.close(fd)
    return " ".join(obs)


def c_seek_holes(d):
    # SEEK_DATA and SEEK_HOLE over holes never written, punched, and set
    # aside but unwritten (both report those as holes), laid out on MiB
    # boundaries so that ext4's 4 KiB blocks and tierfs's 1 MiB ones agree.
    def seek(fd, off, whence):
        try:
            return str(os.lseek(fd, off, whence))
        except OSError as e:
            return errno.errorcode.get(e.errno, str(e.errno))
    out = []
    p = d + "/sparse"
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    os.pwrite(fd, b"a" * MiB, 0)
    os.pwrite(fd, b"b" * MiB, 3 * MiB)
    os.ftruncate(fd, 6 * MiB)
    p2 = d + "/punched"
    fd2 = os.open(p2, os.O_RDWR | os.O_CREAT, 0o644)
    os.pwrite(fd2, b"c" * 3 * MiB, 0)
    fallocate(fd2, 0x01 | 0x02, MiB, MiB)
    p3 = d + "/unwritten"
    fd3 = os.open(p3, os.O_RDWR | os.O_CREAT, 0o644)
    os.posix_fallocate(fd3, 0, 3 * MiB)
    os.pwrite(fd3, b"d" * MiB, MiB)
    os.fsync(fd3)
    for f in (fd, fd2, fd3):
        for off in (0, MiB // 2, MiB, 2 * MiB + 5, 3 * MiB, 4 * MiB, 5 * MiB, 6 * MiB):
            out.append("%s/%s" % (seek(f, off, os.SEEK_DATA), seek(f, off, os.SEEK_HOLE)))
        os.close(f)
    return " ".join(out)


def c_xattr(d):
    p = d + "/f"
    wfile(p, b"x")
    os.setxattr(p, "user.test", b"value\x00bin")
    os.setxattr(p, "user.empty", b"")
    expect(os.getxattr(p, "user.test") == b"value\x00bin", "getxattr")
    names = set(os.listxattr(p))
    expect({"user.test", "user.empty"} <= names, "listxattr %r" % names)
    e1 = err_name(os.setxattr, p, "user.test", b"v", os.XATTR_CREATE)
    e2 = err_name(os.setxattr, p, "user.nope", b"v", os.XATTR_REPLACE)
    os.setxattr(p, "user.test", b"new", os.XATTR_REPLACE)
    expect(os.getxattr(p, "user.test") == b"new", "replace")
    os.setxattr(p, "user.big", rnd(3000, 7))
    expect(os.getxattr(p, "user.big") == rnd(3000, 7), "big value")
    os.removexattr(p, "user.test")
    e3 = err_name(os.getxattr, p, "user.test")
    e4 = err_name(os.removexattr, p, "user.test")
    expect("user.test" not in os.listxattr(p), "removed name listed")
    os.mkdir(d + "/dd")
    os.setxattr(d + "/dd", "user.onadir", b"1")
    expect(os.getxattr(d + "/dd", "user.onadir") == b"1", "xattr on dir")
    expect(e1 == "EEXIST" and e2 == "ENODATA" and e3 == "ENODATA" and e4 == "ENODATA",
           "errnos %s %s %s %s" % (e1, e2, e3, e4))
    return "create_again=%s replace_missing=%s get_removed=%s remove_again=%s" % (e1, e2, e3, e4)


def c_concurrent_size(d):
    """Two writers extend the same file (interleaved 4 KiB pwrites and
    O_APPEND records) while a third process watches st_size."""
    p = d + "/f"
    q = d + "/g"
    wfile(p, b"")
    wfile(q, b"")
    chunk, count = 4096, 400
    rec = 100

    def writer(k):
        fd = os.open(p, os.O_WRONLY)
        afd = os.open(q, os.O_WRONLY | os.O_APPEND)
        for i in range(count):
            idx = 2 * i + k
            os.pwrite(fd, bytes([65 + k]) * chunk, idx * chunk)
            os.write(afd, (b"%d:%05d:" % (k, i)).ljust(rec - 1, b"-") + b"\n")
        os.close(fd)
        os.close(afd)

    pids = []
    for k in range(2):
        pid = os.fork()
        if pid == 0:
            try:
                writer(k)
                os._exit(0)
            except BaseException:
                os._exit(1)
        pids.append(pid)
    last, shrank = 0, False
    fd = os.open(p, os.O_RDONLY)
    alive, bad = set(pids), 0
    while alive:
        s = os.fstat(fd).st_size
        if s < last:
            shrank = True
        last = s
        for pid in list(alive):
            r, status = os.waitpid(pid, os.WNOHANG)
            if r:
                alive.discard(pid)
                bad += status != 0
    expect(bad == 0, "%d writer(s) failed" % bad)
    final = os.fstat(fd).st_size
    os.close(fd)
    expect(not shrank, "st_size went backwards while writers extended")
    expect(final == 2 * count * chunk, "final size %d, want %d" % (final, 2 * count * chunk))
    data = rfile(p)
    for idx in range(2 * count):
        expect(data[idx * chunk:(idx + 1) * chunk] == bytes([65 + idx % 2]) * chunk, "chunk %d wrong" % idx)
    a = rfile(q)
    expect(len(a) == 2 * count * rec, "O_APPEND size %d, want %d" % (len(a), 2 * count * rec))
    lines = a.split(b"\n")[:-1]
    seen = sorted(l[:8] for l in lines)
    want = sorted((b"%d:%05d:" % (k, i)) for k in range(2) for i in range(count))
    expect(seen == want, "O_APPEND records lost or torn")
    return "size=%d append=%d" % (final, len(a))


CHECKS = [(n[2:], f) for n, f in sorted(globals().items()) if n.startswith("c_") and callable(f)]


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    base = sys.argv[1]
    want = set(sys.argv[2:])
    failed = 0
    for name, fn in CHECKS:
        if want and name not in want:
            continue
        d = os.path.join(base, name)
        os.mkdir(d)
        try:
            obs = fn(d)
            print("%s\tpass\t%s" % (name, obs), flush=True)
        except Fail as e:
            failed += 1
            print("%s\tfail\t%s" % (name, e), flush=True)
        except OSError as e:
            failed += 1
            print("%s\tfail\tunexpected %s: %s" % (name, errno.errorcode.get(e.errno, e.errno), e), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
