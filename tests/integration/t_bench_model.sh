#!/usr/bin/env bash
# The yardsticks of `make bench` (scripts/bench_report.py): the pipeline
# model against figures worked out by hand here, and against the floor it
# must never undercut. A wrong yardstick makes every ratio in a note wrong.
# No mount; TAP lines from Python.
cd "$(dirname "$0")/../.." || exit 1
command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }
exec python3 - <<'EOF'
import sys
sys.path.insert(0, "scripts")
import bench_report as br

n = 0
failed = 0


def check(name, cond, detail=""):
    global n, failed
    n += 1
    print(("ok %d - %s" if cond else "not ok %d - %s") % (n, name))
    if not cond:
        failed += 1
        print("# " + detail)


MIB = 1 << 20
# 1 rank, 8 sub-groups of 1 MiB params each (4 MiB per file, 12 blocks of
# state per sub-group), 2 gradient files: 32 gradient blocks in all.
SGP = 1 << 20
rj = {"ranks": 1, "state_bytes": 8 * SGP * 12, "subgroup_params": SGP,
      "subgroups_per_rank": 8, "grad_files": 2, "pipeline": True, "steps": []}
RBW, WBW = 100.0 * MIB, 50.0 * MIB
SG = 12 * MIB  # bytes of one sub-group's state
GRAD = 32


def model(ram_blocks, pipeline=True, mbw=0.0):
    j = dict(rj, pipeline=pipeline)
    return br.pipeline_model(j, ram_blocks * MIB, MIB, RBW, WBW, mbw)


def near(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


# No RAM beside the gradients, pipelined, no mixed bandwidth measured (so
# reads and writes go in turn, as for the floor): two reads alone, six
# iterations that read one sub-group and write another, two writes alone.
m = model(GRAD)
want = 2 * SG / RBW + 6 * (SG / RBW + SG / WBW) + 2 * SG / WBW
check("pipelined, no RAM to spare: head, six iterations, tail",
      m is not None and near(m["pipeline_io_s"], want), "got %s want %s" % (m, want))

# Not pipelined, a side of the disk idles in every phase and RAM comes free
# within the step: the model does not apply.
check("no model without the pipeline", model(GRAD + 12, pipeline=False) is None)

# In turn, a sub-group of RAM to spare saves both transfers of the
# sub-group it keeps.
m = model(GRAD + 12)
want = 2 * SG / RBW + 6 * (SG / RBW + SG / WBW) + 2 * SG / WBW - SG / RBW - SG / WBW
check("in turn, a sub-group of RAM to spare: its read and its write",
      m is not None and near(m["pipeline_io_s"], want), "got %s want %s" % (m, want))

# Sides that do not slow each other (a huge mixed bandwidth): the slower
# side sets each iteration's time.
FREE = 1e18
m = model(GRAD, mbw=FREE)
want = 2 * SG / RBW + 6 * SG / WBW + 2 * SG / WBW
check("independent sides: the write side sets the iterations",
      m is not None and near(m["pipeline_io_s"], want), "got %s want %s" % (m, want))

# Both sides as fast, independent, a sub-group of RAM to spare. A block
# kept of sub-group j shortens the phase that reads j and the one that
# writes j only where the other side moves less too: keeping 3 blocks each
# of sub-groups 0, 2, 4 and 6 shortens the first read, the three iterations
# that write 0, 2, 4 while reading 2, 4, 6, and the tail that writes 6:
# 15 blocks of time for 12 of RAM, the most there is (a single sub-group
# or a read-ahead saves one per block).
BW = RBW
m = br.pipeline_model(rj, (GRAD + 12) * MIB, MIB, BW, BW, FREE)
want = (4 * SG + 6 * SG - 15 * MIB) / BW
check("independent equal sides, a sub-group of RAM: kept every other sub-group",
      m is not None and near(m["pipeline_io_s"], want), "got %s want %s" % (m, want))

# A mixed bandwidth below both sides together slows the iterations that
# move both ways, and only those.
mbw = 120.0 * MIB
m = model(GRAD, mbw=mbw)
want = 2 * SG / RBW + 6 * max(min(SG / RBW + SG / WBW, 2 * SG / mbw), SG / WBW) + 2 * SG / WBW
check("mixed bandwidth: the iterations take (read + write) / mixed",
      m is not None and near(m["pipeline_io_s"], want), "got %s want %s" % (m, want))

# A budget below the gradients: the rule cannot pin them, no model.
check("no model when the gradients do not fit", model(GRAD - 1) is None)

def monotone_above_floor(name, seconds, rbw, wbw, step):
    """More RAM never makes SECONDS(extra blocks) slower, and it never
    undercuts the floor."""
    prev, ok, worst = None, True, ""
    for extra in range(0, 8 * 12 + 1, step):
        t = seconds(extra)
        f = br.belady(rj, (GRAD + extra) * MIB, MIB, pin_grads=True)
        floor = max(f["disk_read_bytes"] / rbw, f["disk_write_bytes"] / wbw)
        if (prev is not None and t > prev + 1e-9) or t < floor - 1e-9:
            ok, worst = False, "extra %d: model %.4f prev %s floor %.4f" % (extra, t, prev, floor)
        prev = t
    check(name, ok, worst)


monotone_above_floor("more RAM never slower, never below the floor",
                     lambda extra: model(GRAD + extra)["pipeline_io_s"], RBW, WBW, 4)

# DeepSpeed's own order (tierfs-replay --pipeline on): the read of i+1
# starts once i is in, the write of i once i-1 is written. Independent
# sides, no CPU: with the write side the slower, writes run back to back
# after the first read; with the read side the slower, reads do, and the
# last write follows them.
S8, C0 = [SG] * 8, [0.0] * 8
t = br.deepspeed_order_s(S8, S8, C0, RBW, WBW, FREE)
check("DeepSpeed's order, writes slower: the first read, then 8 writes",
      near(t, SG / RBW + 8 * SG / WBW), "got %s" % t)
t = br.deepspeed_order_s(S8, S8, C0, WBW, RBW, FREE)
check("DeepSpeed's order, reads slower: 8 reads, then the last write",
      near(t, 8 * SG / WBW + SG / RBW), "got %s" % t)
# CPU passes longer than any transfer: the first read, the passes one
# after the other, the last write.
t = br.deepspeed_order_s(S8, S8, [1.0] * 8, RBW, WBW, FREE)
check("DeepSpeed's order, CPU-bound: first read + 8 passes + last write",
      near(t, SG / RBW + 8.0 + SG / WBW), "got %s" % t)
# In turn (no mixed bandwidth), a read and a write in flight together each
# move at half their side's rate: never faster than the serial sum of the
# transfers, nor slower than the lockstep head + iterations + tail.
t = br.deepspeed_order_s(S8, S8, C0, RBW, WBW, 0.0)
serial = 8 * (SG / RBW + SG / WBW)
check("DeepSpeed's order, in turn: between the serial sum and lockstep's",
      serial - 1e-9 <= t <= 2 * SG / RBW + 6 * (SG / RBW + SG / WBW) + 2 * SG / WBW + 1e-9,
      "got %s serial %s" % (t, serial))

# Its model: none for other schedules, never below the floor, more RAM
# never slower.
ds = dict(rj, schedule="deepspeed")
check("the DeepSpeed-order model only for such runs",
      br.deepspeed_model(rj, (GRAD + 12) * MIB, MIB, RBW, WBW, 0.0, 0.0) is None and
      br.pipeline_model(ds, (GRAD + 12) * MIB, MIB, RBW, WBW, 0.0) is None)
monotone_above_floor(
    "DeepSpeed-order model: more RAM never slower, never below the floor",
    lambda extra: br.deepspeed_model(ds, (GRAD + extra) * MIB, MIB, BW, BW, FREE,
                                     0.0)["pipeline_io_s"], BW, BW, 8)

# The report's warm-up: on tierfs, up to the first step whose update phase
# began with the order learned (its backward snapshot), at least 2, and one
# step left to average.
import os
import tempfile


def warm_with(learned_from, nsteps):
    with tempfile.TemporaryDirectory() as sd:
        for k in range(1, nsteps + 1):
            with open(os.path.join(sd, "step%d-backward" % k), "w") as f:
                yes = learned_from is not None and k >= learned_from
                f.write("order enabled=yes learned=%s cycle=%d\n" % ("yes" if yes else "no",
                                                                   5700 if yes else 0))
        return br.learned_warm(sd, nsteps)


check("warm-up: learned before step 2's update, steps 1-2", warm_with(2, 5) == 2,
      "got %s" % warm_with(2, 5))
check("warm-up: learned before step 3's update (4 ranks), steps 1-3", warm_with(3, 5) == 3,
      "got %s" % warm_with(3, 5))
check("warm-up: never learned, no extra steps", warm_with(None, 5) == 0,
      "got %s" % warm_with(None, 5))
check("warm-up: learned before the last step, one step left", warm_with(5, 5) == 4,
      "got %s" % warm_with(5, 5))

print("1..%d" % n)
sys.exit(1 if failed else 0)
EOF
