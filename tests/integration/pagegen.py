#!/usr/bin/env python3
"""Pages that say which write put them there, for the crash tests
(t_rewritecrash, t_fullrewrite): every 4 KiB page of a 4 MiB file holds one
record (page number, generation) repeated, so a read tells a page torn
between two writes, a page of the wrong place and a page older than its
last acknowledged write apart.

    pagegen.py init PATH             write generation 0 of every page, fsync
    pagegen.py write PATH SEED EVERY rewrite random pages for ever; after
                                     each fsync (one every EVERY writes)
                                     print "page gen" for the writes it
                                     covered
    pagegen.py check PATH ACKED...   read PATH (an I/O error fails): every
                                     page whole, in its place, and no older
                                     than the generations ACKED files list
Standard library only.
"""
import os
import random
import struct
import sys

PG, NPG = 4096, 1024


def page(p, gen):
    return struct.pack("<2I", p, gen) * (PG // 8)


def init(path):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for p in range(NPG):
        os.write(fd, page(p, 0))
    os.fsync(fd)
    os.close(fd)


def write(path, seed, every):
    fd = os.open(path, os.O_RDWR)
    rng = random.Random(seed)
    gen = seed << 20
    done = []
    while True:
        p = rng.randrange(NPG)
        gen += 1
        os.pwrite(fd, page(p, gen), p * PG)
        done.append((p, gen))
        if len(done) == every:
            os.fsync(fd)
            sys.stdout.write("".join("%d %d\n" % d for d in done))
            sys.stdout.flush()
            done = []


def check(path, acked):
    want = {}
    for f in acked:
        for line in open(f):
            parts = line.split()
            if len(parts) == 2:
                p, g = int(parts[0]), int(parts[1])
                want[p] = max(want.get(p, 0), g)
    data = open(path, "rb").read()  # an I/O error raises here
    if len(data) != NPG * PG:
        sys.exit("size %d" % len(data))
    for p in range(NPG):
        recs = set(struct.iter_unpack("<2I", data[p * PG:(p + 1) * PG]))
        if len(recs) != 1:
            sys.exit("page %d torn: %d different records" % (p, len(recs)))
        (pp, gen), = recs
        if pp != p or gen < want.get(p, 0):
            sys.exit("page %d holds page %d gen %d, acknowledged gen %d" %
                     (p, pp, gen, want.get(p, 0)))
    print("# %d pages checked, %d acknowledged writes" %
          (NPG, sum(1 for f in acked for _ in open(f))))


if __name__ == "__main__":
    cmd, path = sys.argv[1], sys.argv[2]
    if cmd == "init":
        init(path)
    elif cmd == "write":
        write(path, int(sys.argv[3]), int(sys.argv[4]))
    elif cmd == "check":
        check(path, sys.argv[3:])
    else:
        sys.exit("pagegen.py: unknown command %s" % cmd)
