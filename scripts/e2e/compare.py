"""Compare two runs of scripts/e2e/train.py (the reference on a plain
directory, the other on a tierfs mount), for scripts/e2e/run.sh.

  compare.py losses REF_OUT OTHER_OUT   every rank's every step, bit for bit
  compare.py files REF_DIR OTHER_DIR    the swap trees: names, sizes, bytes
  compare.py times REF_OUT OTHER_OUT    time per step of both (printed only)

Prints what it found as "# " lines (TAP comments) and exits 0 when equal,
1 when not. Only the standard library: it runs with any python3.
"""
import hashlib
import json
import os
import sys


def load(out):
    runs = {}
    for name in sorted(os.listdir(out)):
        if name.startswith("rank-") and name.endswith(".json"):
            with open(os.path.join(out, name)) as f:
                runs[int(name[5:-5])] = json.load(f)
    return runs


def losses(ref_out, other_out):
    a, b = load(ref_out), load(other_out)
    if not a or sorted(a) != sorted(b):
        print(f"# ranks differ: {sorted(a)} against {sorted(b)}")
        return 1
    bad = 0
    for r in sorted(a):
        la, lb = a[r]["losses"], b[r]["losses"]
        if len(la) != len(lb) or not la:
            print(f"# rank {r}: {len(la)} steps against {len(lb)}")
            bad += 1
            continue
        print(f"# rank {r}: step  loss (plain)          loss (tierfs)")
        for i, (x, y) in enumerate(zip(la, lb)):
            mark = "" if x == y else "   DIFFERS"
            bad += x != y
            print(f"#   {i:4d}  {float.fromhex(x):.9f} {x}  {float.fromhex(y):.9f} {y}{mark}")
    return 1 if bad else 0


def tree(root):
    files = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            h = hashlib.sha256()
            with open(p, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            files[os.path.relpath(p, root)] = (os.path.getsize(p), h.hexdigest())
    return files


def files(ref_dir, other_dir):
    a, b = tree(ref_dir), tree(other_dir)
    total = sum(s for s, _ in a.values())
    print(f"# swap files: {len(a)} in the plain directory ({total / 2**20:.1f} MiB), {len(b)} on tierfs")
    bad = 0
    for name in sorted(set(a) | set(b)):
        if a.get(name) != b.get(name):
            bad += 1
            if bad <= 10:
                print(f"#   {name}: plain {a.get(name)} tierfs {b.get(name)}")
    if not a:
        print("# no swap files at all")
        return 1
    return 1 if bad else 0


def times(ref_out, other_out):
    a, b = load(ref_out).get(0), load(other_out).get(0)
    if not a or not b:
        return 1
    print(f"# DeepSpeed {a['deepspeed']}, torch {a['torch']}, accelerator {a['accelerator']}, "
          f"{a['params'] / 1e6:.1f}M parameters, {len(a['losses'])} steps")
    for label, run in (("plain", a), ("tierfs", b)):
        s = run["step_s"]
        rest = s[1:] or s
        print(f"# time per step ({label}): first {s[0]:.2f} s, then mean {sum(rest) / len(rest):.2f} s, "
              f"min {min(rest):.2f} s, max {max(rest):.2f} s")
    return 0


if __name__ == "__main__":
    cmds = {"losses": losses, "files": files, "times": times}
    if len(sys.argv) != 4 or sys.argv[1] not in cmds:
        sys.exit(__doc__)
    sys.exit(cmds[sys.argv[1]](sys.argv[2], sys.argv[3]))
