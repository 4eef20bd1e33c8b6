#!/usr/bin/env python3
"""bench_report.py: the floor (Belady on the known order) and the report of `make bench`.

Standard library only (python3 from Debian). Two commands:

  bench_report.py floor --replay-json F --ram B --block-size BS --read-bps R --write-bps W
      prints the floor as JSON.
  bench_report.py report --dir build/bench
      reads the run files scripts/bench.sh left in that directory, prints the table,
      writes summary.json and steps.dat (the data scripts/plot_bench.gp draws).

The floor model (what an optimal policy must move to/from the disk per steady step):
- The disk holds every block; the RAM tier holds B bytes, block-granular
  (a partial last block of a file still takes a whole block of RAM).
- Blocks of every file, gradients included, compete for B: the optimum may
  spill a gradient block as well as a state block (the cost per block is the
  same). With the gradient rule pinning gradients in RAM the result is the
  same whenever B covers them (see belady()); both figures are reported.
- Per step: backward writes every gradient block; then per sub-group i
  (ranks in turn, they run in lock step): read every block of param,
  exp_avg, exp_avg_sq and the gradients, then write param, exp_avg,
  exp_avg_sq. Writes overwrite whole blocks, so a write needs no read.
- The FS may keep a block dirty in RAM across steps (DeepSpeed never fsyncs;
  durability is owed at fsync/unmount only). A dirty block costs one disk
  write when it is evicted.
- Policy: Belady's MIN on next reads, applied at writes (belady() explains
  why that is the optimum for reads + writes on this trace). A read miss
  costs a disk read; evicting a dirty block or sending a write straight to
  disk costs a disk write.
- The trace is simulated for 3 cycles and the third is counted (steady state;
  the fourth cycle supplies the next uses).
- Time floor = the smaller of disk read bytes / read bandwidth + disk write
  bytes / write bandwidth (reads and writes in turn) and (read + write
  bytes) / mixed bandwidth (reads and writes in flight together, qd8 each,
  as the pipelined update does), bandwidths measured in the same run with
  the same I/O engine (tierfs-replay --probe). The
  update phase cannot be shorter than its CPU pass either: floor_s is
  max(io floor, measured CPU time of the update).

The pipeline model (pipeline_model(); reported beside the floor, not instead
of it; runs with tierfs-replay --pipeline lockstep only). The floor counts
bytes only. A lockstep pipelined update also waits: iteration i starts the
read of sub-group i+1 and the write of i-1, runs the CPU pass of i, and
joins both before i+1. (DeepSpeed's own order, --pipeline on, starts the
write of i once i-1 is written, beside the rest of the read of i+1; the
model does not cover it.) So the first two reads run with
the disk's write side idle and the last two writes with its read side idle,
whatever the policy does, and each iteration between them moves a sub-group
each way. RAM beside the pinned gradients (C blocks) is what can take work
out of a phase: a block kept from its write to its next read takes one block
off that sub-group's write phase and one off its read phase; a block read
ahead or written behind, off one side of one phase. Either holds its RAM
across the step boundary (the only time a side of the disk idles is at the
head and the tail), so C blocks at most. They are spent greedily where they
save the most time (keeping every other sub-group in part is often best: the
write of j and the read of j + 2 share an iteration), so the model is the
time of a good schedule, not a proven least: a cleverer one may beat it by a
little. A phase takes its bytes over the bandwidths as the floor does, and
each side at least its own bytes over its own bandwidth; the model is the
sum over the phases, and never below the floor. At the bench's default (RAM
= half the state, 8 sub-groups) it is about 1.25 times the floor.
"""
import heapq
import json
import math
import os
import re
import sys


def layout(rj):
    """Per-rank sub-group sizes (params) exactly as tierfs-replay computes them."""
    ranks = rj["ranks"]
    rank_params = rj["state_bytes"] // 12 // ranks
    sgp = rj["subgroup_params"]
    n = rj["subgroups_per_rank"]
    return [min(sgp, rank_params - i * sgp) for i in range(n)], ranks


def trace(rj, bs):
    """One steady step as (block, is_write) accesses, plus block sizes and kinds.

    backward: every gradient block written; update: per sub-group i, ranks in
    turn (they run in lock step): read param, exp_avg, exp_avg_sq and gradient
    blocks, then write param, exp_avg, exp_avg_sq blocks."""
    sizes, ranks = layout(rj)
    nblk = lambda b: (b + bs - 1) // bs
    bsize, is_grad = [], []

    def blocks(fbytes, grad):
        ids = []
        for k in range(nblk(fbytes)):
            ids.append(len(bsize))
            bsize.append(min(bs, fbytes - k * bs))
            is_grad.append(grad)
        return ids

    state, grads = {}, {}
    for i, numel in enumerate(sizes):
        for r in range(ranks):
            state[i, r] = [b for _ in range(3) for b in blocks(numel * 4, False)]
            g, units, off, gl = rj["grad_files"], numel // 256, 0, []
            for k in range(g):
                end = numel if k == g - 1 else units * (k + 1) // g * 256
                gl += blocks((end - off) * 4, True)
                off = end
            grads[i, r] = gl
    cycle = []
    for i in range(len(sizes)):
        for r in range(ranks):
            cycle += [(b, True) for b in grads[i, r]]
    for i in range(len(sizes)):
        for r in range(ranks):
            cycle += [(b, False) for b in state[i, r] + grads[i, r]]
            cycle += [(b, True) for b in state[i, r]]
    return cycle, bsize, is_grad


def belady(rj, ram, bs, pin_grads=False):
    """Disk bytes per steady step of the optimal policy (see the model above).

    Every block is read once and then overwritten once per step, so a block's
    content is dead from its read to its next write: RAM is only needed from a
    write to the next read of the same block. Keeping that interval in RAM
    saves one disk write and one disk read; not keeping it costs both. The
    best choice of intervals under "at most C blocks at any time" is Belady's
    rule applied at writes: keep the block whose next read comes soonest,
    evict (write back) the one read farthest away, or write the incoming one
    straight to disk if its next read is the farthest.

    pin_grads: the gradient rule as configured (gradients always in RAM, the
    rest of the budget caches state). Because every gradient and every kept
    state block are resident together at the start of each update phase, the
    two give the same disk bytes whenever the budget covers the gradients."""
    cycle, bsize, is_grad = trace(rj, bs)
    cap = ram // bs
    if pin_grads:
        cap -= sum(1 for g in is_grad if g)
    L = len(cycle)
    seq = cycle * 4
    nread = [math.inf] * len(seq)  # at a write: position of the block's next read
    last = {}
    for t in range(len(seq) - 1, -1, -1):
        b, w = seq[t]
        if w:
            nread[t] = last.get(b, math.inf)
        else:
            last[b] = t
    cache = {}  # block -> position of its next read
    heap = []  # (-next read, block), lazy deletion
    rd = wr = hit = reads = 0
    for t in range(3 * L):
        b, w = seq[t]
        count = t >= 2 * L
        if pin_grads and is_grad[b]:
            if count and not w:
                reads += bsize[b]
                hit += bsize[b]
            continue
        if not w:
            if count:
                reads += bsize[b]
            if b in cache:
                del cache[b]  # dead until its next write
                if count:
                    hit += bsize[b]
            elif count:
                rd += bsize[b]
            continue
        nr = nread[t]
        if cap <= 0:
            if count:
                wr += bsize[b]
            continue
        if len(cache) >= cap:
            while heap:
                nu, v = heap[0]
                if cache.get(v) == -nu:
                    break
                heapq.heappop(heap)
            if -nu <= nr:  # the incoming block is read last: straight to disk
                if count:
                    wr += bsize[b]
                continue
            heapq.heappop(heap)
            del cache[v]
            if count:
                wr += bsize[v]  # dirty: write back before it leaves RAM
        cache[b] = nr
        heapq.heappush(heap, (-nr, b))
    return {
        "ram_bytes": ram,
        "block_size": bs,
        "blocks": len(bsize),
        "gradient_blocks": sum(1 for g in is_grad if g),
        "ram_blocks": ram // bs,
        "pin_gradients": pin_grads,
        "disk_read_bytes": rd,
        "disk_write_bytes": wr,
        "hit_ratio": hit / reads if reads else 1.0,
    }


def phase_s(r, w, rbw, wbw, mbw):
    """Least time to read R and write W bytes together: as the floor (in turn,
    or mixed when measured), and no side faster than its own bandwidth."""
    t = r / rbw + w / wbw
    if mbw > 0:
        t = min(t, (r + w) / mbw)
    return max(t, r / rbw, w / wbw)


def cut_blocks(cur, moves, k):
    """CUR (entries [read blocks, read bytes, write blocks, write bytes]) with
    K blocks off each (entry, side) of MOVES, as a new list."""
    new = [list(p) for p in cur]
    for i, side in moves:
        blk, byt = new[i][2 * side], new[i][2 * side + 1]
        new[i][2 * side + 1] = byt - byt * k // blk if blk else 0
        new[i][2 * side] = blk - k
    return new


def spend_credit(start, options, credit, chunk, total, per_block):
    """Spend CREDIT blocks of RAM on START greedily, CHUNK at a time, where
    TOTAL (the seconds of a list of entries) gains the most per block of RAM
    (PER_BLOCK) or per step. OPTIONS: (moves, RAM blocks per block taken
    off). Returns the seconds and the credit left."""
    cur, left, now = [list(p) for p in start], credit, total(start)
    while left > 0:
        best, score = None, 0.0
        for mv, cost in options:
            k = min(chunk, left // cost)
            if k < 1 or any(cur[i][2 * side] < k for i, side in mv):
                continue
            new = cut_blocks(cur, mv, k)
            tn = total(new)
            sc = (now - tn) / (k * cost) if per_block else now - tn
            if sc > score * (1 + 1e-9):
                best, score, used, bt = new, sc, k * cost, tn
        if best is None:
            break
        cur, now, left = best, bt, left - used
    return now, left


def pipeline_model(rj, ram, bs, rbw, wbw, mbw):
    """A good schedule's time for the pipelined update phase (see above).

    None when the gradients do not fit the budget (the rule cannot pin them,
    the model assumes it does), and without the pipeline: there a side of the
    disk idles in every phase, so RAM used to read ahead or write behind comes
    free again within the step, and the model's count of it does not hold.
    Returns the model's seconds and its parts."""
    sizes, ranks = layout(rj)
    cycle, bsize, is_grad = trace(rj, bs)
    credit = ram // bs - sum(1 for g in is_grad if g)
    # Replays from before the schedule was recorded ran in lockstep.
    sched = rj.get("schedule", "lockstep" if rj.get("pipeline", True) else "serial")
    if credit < 0 or sched != "lockstep":
        return None
    nblk = lambda b: (b + bs - 1) // bs
    # per sub-group, all ranks (they run in lock step): state blocks, bytes
    sg = [(3 * ranks * nblk(n * 4), 3 * ranks * n * 4) for n in sizes]
    n = len(sg)
    # phases as [read blocks, read bytes, write blocks, write bytes]: the
    # first read, one per iteration, the last write
    ph = [[sg[0][0], sg[0][1], 0, 0]]
    for i in range(n):
        r = sg[i + 1] if i + 1 < n else (0, 0)
        w = sg[i - 1] if i > 0 else (0, 0)
        ph.append([r[0], r[1], w[0], w[1]])
    ph.append([0, 0, sg[-1][0], sg[-1][1]])
    # which phase reads and which writes each sub-group
    rph = list(range(n))
    wph = [i + 2 for i in range(n - 1)] + [n + 1]
    t = lambda p: phase_s(p[1], p[3], rbw, wbw, mbw)

    # Spend the RAM credit greedily, a chunk at a time, where it saves the
    # most time per block: keeping blocks of sub-group j takes them off both
    # its read and its write phase; reading ahead or writing behind, off one
    # side of one phase. The write of j and the read of j + 2 share an
    # iteration, so keeping j alone rarely shortens one that moves both
    # ways; keeping j, j + 2, ... together does: those runs are options too.
    # An option is (moves, RAM blocks per block taken off).
    options = [([(i, side)], 1) for i in range(len(ph)) for side in (0, 1)]
    for j in range(n):
        run = []
        for m in range(j, n, 2):
            run = run + [(rph[m], 0), (wph[m], 1)]
            options.append((run, len(run) // 2))
    chunk = max(1, credit // 256)
    total = lambda cur: sum(t(p) for p in cur)

    # Neither greedy is always the better: the model is the better of the two.
    io, left = min(spend_credit(ph, options, credit, chunk, total, pb) for pb in (True, False))
    return {"schedule": "lockstep", "credit_blocks": credit, "credit_unused_blocks": left,
            "phases": len(ph), "pipeline_io_s": io}


def deepspeed_order_s(rd, wr, cpu, rbw, wbw, mbw):
    """Seconds of an update phase in DeepSpeed's pipelined order: RD[i] and
    WR[i] bytes of sub-group i's read and write, CPU[i] its CPU pass.

    swap_in(i) waits for the read of i and starts the read of i+1; after the
    CPU pass, swap_out(i) waits for the write of i-1 and starts the write of
    i (the last one waited for). The disk is a fluid: one transfer alone at
    its side's bandwidth; a read and a write together share it evenly, in
    turn or mixed, whichever moves more."""
    n = len(rd)
    alone = (rbw, wbw)
    both = (rbw / 2, wbw / 2)
    if mbw > 0 and min(mbw / 2, rbw) + min(mbw / 2, wbw) > sum(both):
        both = (min(mbw / 2, rbw), min(mbw / 2, wbw))
    st = {"t": 0.0, "r": None, "w": None}  # bytes left of the transfer in flight

    def run(until=None, dt=None):
        """Move time on until UNTIL's side ('r' or 'w') has no transfer in
        flight, or DT seconds have passed."""
        end = st["t"] + dt if dt is not None else None
        while True:
            if until and st[until] is None:
                return
            rr, wr_ = both if st["r"] is not None and st["w"] is not None else alone
            steps = [st["r"] / rr if st["r"] is not None else math.inf,
                     st["w"] / wr_ if st["w"] is not None else math.inf,
                     end - st["t"] if end is not None else math.inf]
            d = min(steps)
            if d == math.inf:
                return
            st["t"] += d
            for side, rate, k in (("r", rr, 0), ("w", wr_, 1)):
                if st[side] is not None:
                    st[side] = None if k == steps.index(d) else max(st[side] - rate * d, 0.0)
            if end is not None and st["t"] >= end - 1e-12:
                return

    st["r"] = float(rd[0])
    run("r")
    for i in range(n):
        run("r")
        if i + 1 < n:
            st["r"] = float(rd[i + 1])
        run(dt=cpu[i])
        run("w")
        st["w"] = float(wr[i])
    run("w")
    return st["t"]


def deepspeed_model(rj, ram, bs, rbw, wbw, mbw, cpu_s):
    """A good schedule's time for the update phase in DeepSpeed's pipelined
    order (tierfs-replay --pipeline on), as pipeline_model() for lockstep:
    RAM beside the pinned gradients spent greedily on keeping blocks of a
    sub-group from its write to its next read (off both transfers), or on
    reading ahead or writing behind (off one), where the simulated phase
    (deepspeed_order_s, CPU passes included) gains the most. None where the
    gradients do not fit the budget."""
    sizes, ranks = layout(rj)
    cycle, bsize, is_grad = trace(rj, bs)
    credit = ram // bs - sum(1 for g in is_grad if g)
    if credit < 0 or rj.get("schedule") != "deepspeed":
        return None
    nblk = lambda b: (b + bs - 1) // bs
    # per sub-group, all ranks: [read blocks, read bytes, write blocks, write bytes]
    sg = [[3 * ranks * nblk(k * 4), 3 * ranks * k * 4] * 2 for k in sizes]
    n = len(sg)
    cpu = [cpu_s * k / sum(sizes) for k in sizes]
    total = lambda cur: deepspeed_order_s([p[1] for p in cur], [p[3] for p in cur], cpu,
                                          rbw, wbw, mbw)
    options = [([(i, side)], 1) for i in range(n) for side in (0, 1)]
    for j in range(n):
        for stride in (1, 2):
            run = []
            for m in range(j, n, stride):
                run = run + [(m, 0), (m, 1)]
                options.append((run, len(run) // 2))
    chunk = max(1, credit // 128)
    io, left = min(spend_credit(sg, options, credit, chunk, total, pb) for pb in (True, False))
    return {"schedule": "deepspeed", "credit_blocks": credit, "credit_unused_blocks": left,
            "phases": n, "pipeline_io_s": io}


def cmd_floor(args):
    a = dict(zip(args[::2], args[1::2]))
    rj = json.load(open(a["--replay-json"]))
    ram, bs = int(a["--ram"]), int(a["--block-size"])
    f = belady(rj, ram, bs)
    f["pinned_gradients"] = belady(rj, ram, bs, pin_grads=True)
    rbw, wbw = float(a["--read-bps"]), float(a["--write-bps"])
    f["read_Bps"], f["write_Bps"] = rbw, wbw
    # The update-phase floor uses the configured rule (gradients pinned): its
    # disk bytes all fall in the update phase, and it equals the optimum when
    # the budget covers the gradients. A budget below them: the optimum.
    pg = f["pinned_gradients"]
    src = pg if pg["ram_blocks"] >= pg["gradient_blocks"] else f
    f["floor_basis"] = "gradients pinned" if src is pg else "optimum (budget below gradients)"
    f["floor_serial_s"] = src["disk_read_bytes"] / rbw + src["disk_write_bytes"] / wbw
    f["floor_io_s"] = f["floor_serial_s"]
    mbw = float(a.get("--mixed-bps", 0))
    f["mixed_Bps"] = mbw
    if mbw > 0:
        # a device may serve reads and writes together faster than in turn
        f["floor_mixed_s"] = (src["disk_read_bytes"] + src["disk_write_bytes"]) / mbw
        f["floor_io_s"] = min(f["floor_serial_s"], f["floor_mixed_s"])
    steady = [s for s in rj["steps"] if not s["init"]]
    cpu = min(s["update_cpu_s"] for s in steady) if steady else 0.0
    f["update_cpu_s"] = cpu
    f["floor_s"] = max(f["floor_io_s"], cpu)
    pm = None
    if src is pg:
        pm = (pipeline_model(rj, ram, bs, rbw, wbw, mbw) or
              deepspeed_model(rj, ram, bs, rbw, wbw, mbw, cpu))
    if pm:
        f["pipeline"] = pm
        f["pipeline_s"] = max(pm["pipeline_io_s"], f["floor_s"])
    json.dump(f, sys.stdout, indent=1)
    print()


# ---- report -------------------------------------------------------------------------

STAT_LINE = re.compile(r"^\s*([A-Za-z0-9_./ -]+?)\s*(?:[:=]\s*|\s+)(-?[0-9.]+(?:e[-+]?\d+)?)\s*(\S*)")


def parse_stats(path):
    """Generic parse of MNT/.tierfs/stats: 'key: value', 'key = value' or 'key value'
    lines; '[section]' or 'section:' lines prefix the keys that follow."""
    out = {}
    if not os.path.exists(path):
        return out
    sect = ""
    for line in open(path, errors="replace"):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        # tierfs's own format: "tier NAME k=v k=v ...", "cache k=v ...", "order k=v ..."
        kv = re.findall(r"(\w+)=([-+.\w]+)", s)
        if kv and "=" not in s.split()[0]:
            head = s.split()[0]
            pre = head + "." + (s.split()[1] + "." if head == "tier" else "")
            for k, v in kv:
                try:
                    out[pre + k] = float(v)
                except ValueError:
                    out[pre + k] = 1.0 if v == "yes" else 0.0 if v == "no" else out.get(pre + k, 0.0)
            continue
        m = re.match(r"^\[(.+)\]$", s) or re.match(r"^([A-Za-z][\w ./-]*):$", s)
        if m:
            sect = m.group(1).strip().replace(" ", ".") + "."
            continue
        m = STAT_LINE.match(s)
        if m:
            try:
                out[sect + m.group(1).strip().replace(" ", ".")] = float(m.group(2))
            except ValueError:
                pass
    return out


def stats_delta(before, after):
    d = {}
    for k, v in after.items():
        if "ratio" in k or "learned" in k or "cycle" in k or "capacity" in k or k.endswith("used"):
            d[k] = v  # levels, not counters
        else:
            d[k] = v - before.get(k, 0.0)
    return d


def fmt_bytes(b):
    if b is None:
        return "-"
    return "%.2fG" % (b / 1e9)


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def learned_warm(sd, n):
    """Warm-up steps of a tierfs run, from its stats snapshots in SD: up to
    and including the first step whose update phase began with the access
    order learned (its backward snapshot says learned=yes). The blocks that
    step writes are the first the keep plan keeps, so the step after it is
    the first steady one: a step that began before, reads from disk what
    the plan would have kept (4 ranks, learned during step 2: step 3 read
    about 240 such blocks, steps 4 and 5 under 15). At least one step is
    left; 0 where the order was never learned (BENCH_LEARN=no)."""
    for k in range(1, n + 1):
        st = parse_stats(os.path.join(sd, "step%d-backward" % k))
        if st.get("order.learned") == 1.0:
            return min(k, n - 1)
    return 0


# ---- disk + s3 striped (the tierfs_s3 rows of scripts/bench.sh) ----
# The replay on a mount whose stripe is the disk and an s3 tier on a local
# SeaweedFS; no floor of its own (the store's bandwidth is not probed), its
# speedup against the same single-disk baseline; disk rd/wr count both
# persistent tiers, as for tierfs2p.
S3_SETUP = "tierfs_s3"


def setup_tiers(setup):
    """The persistent tiers a setup's disk columns add up."""
    return {"tierfs2p": ("nvme0", "nvme1"), S3_SETUP: ("nvme0", "s3")}.get(setup, ("nvme0",))


def s3_note(runs, meta):
    if any(r["setup"] == S3_SETUP for r in runs):
        print("%s: the tierfs mount with an s3 tier beside the disk in the stripe (SeaweedFS on this "
              "host, scripts/bench.sh BENCH_S3_DIR); disk rd/wr = disk + s3; speedup against the same "
              "single-disk baseline; no floor (the store is not probed)" % S3_SETUP)


def s3_summary(runs):
    ok = [r for r in runs if r["setup"] == S3_SETUP and r["status"] == "ok"]
    if not ok:
        return None
    return {k: mean([r[m] for r in ok]) for k, m in (
        ("update_s", "update_mean_s"), ("backward_s", "backward_mean_s"), ("speedup", "speedup"),
        ("backward_speedup", "backward_speedup"), ("hit_ratio", "hit_ratio"))}


def cmd_report(args):
    d = args[args.index("--dir") + 1]
    meta = json.load(open(os.path.join(d, "meta.json")))
    runs = []
    for name in sorted(os.listdir(d)):
        m = re.match(r"^(baseline|tierfs|tierfs2p|tierfs_s3|%s)-(\d+)\.json$" % "|".join(APP_SETUPS), name)
        if not m:
            continue
        setup, rep = m.group(1), int(m.group(2))
        run = {"setup": setup, "rep": rep, "file": name}
        st_path = os.path.join(d, "%s-%d.status" % (setup, rep))
        run["status"] = open(st_path).read().strip() if os.path.exists(st_path) else "ok"
        warm = 0
        try:
            rj = json.load(open(os.path.join(d, name)))
            run["replay"] = rj
            steady = [s for s in rj["steps"] if not s["init"]]
            run["init_s"] = [s for s in rj["steps"] if s["init"]][0]["update_s"]
            run["update_s"] = [s["update_s"] for s in steady]
            run["backward_s"] = [s["backward_s"] for s in steady]
            run["update_cpu_s"] = [s["update_cpu_s"] for s in steady]
            run["verify"] = rj.get("verify")
            # steps 1 and 2 warm up (the learner sees the cycle twice before it
            # trusts it): averaged are steps 3..N when N > 3, else 2..N; on
            # tierfs, also every step up to the first whose update phase
            # began with the order learned (learned_warm)
            warm = 2 if len(steady) > 3 else 1 if len(steady) > 1 else 0
            if setup in APP_SETUPS:
                warm = app_warm(setup, len(steady), warm)
            if setup.startswith("tierfs"):
                warm = max(warm, learned_warm(os.path.join(d, "%s-%d.stats" % (setup, rep)),
                                              len(steady)))
            run["warm_steps"] = warm
            tail = steady[warm:]
            run["update_mean_s"] = mean([s["update_s"] for s in tail])
            run["backward_mean_s"] = mean([s["backward_s"] for s in tail])
            run["bytes_read_per_step"] = steady[-1]["bytes_read"] if steady else 0
            run["bytes_written_per_step"] = steady[-1]["bytes_written"] if steady else 0
        except (OSError, ValueError, KeyError, IndexError) as e:
            if run["status"] == "ok":
                run["status"] = "failed: no replay result (%s)" % e
        if setup.startswith("tierfs"):
            # counters per step (its backward and its update phase), for the
            # same steps as the update time; the last step's are kept whole
            sd = os.path.join(d, "%s-%d.stats" % (setup, rep))
            n = meta["steps"]
            snap = lambda k, phase: parse_stats(os.path.join(sd, "step%d-%s" % (k, phase)))
            run["tierfs_steps"] = []
            first = warm + 1 if "update_s" in run else n
            for k in range(first, n + 1):
                prev = snap(k - 1, "update" if k > 1 else "init")
                bwd, upd = snap(k, "backward"), snap(k, "update")
                run["tierfs_steps"].append((stats_delta(prev, bwd) if bwd else {},
                                            stats_delta(bwd, upd) if upd else {}))
            run["tierfs_stats_backward"], run["tierfs_stats"] = (
                run["tierfs_steps"][-1] if run["tierfs_steps"] else ({}, {}))
            run["tierfs_stats_raw_last"] = snap(n, "update")
        runs.append(run)
    # the application-side setups after the others, in their own order
    runs.sort(key=lambda r: (APP_SETUPS.index(r["setup"]) + 1 if r["setup"] in APP_SETUPS else 0))
    floor = None
    fp = os.path.join(d, "floor.json")
    if os.path.exists(fp):
        floor = json.load(open(fp))
    floor2p = None
    fp = os.path.join(d, "floor2p.json")
    if os.path.exists(fp):
        floor2p = json.load(open(fp))
    two = None
    tp = os.path.join(d, "two_tier.json")
    if os.path.exists(tp):
        two = json.load(open(tp))

    base_ok = [r for r in runs if r["setup"] == "baseline" and r["status"] == "ok"]
    base_upd = mean([r["update_mean_s"] for r in base_ok])
    base_bwd = mean([r["backward_mean_s"] for r in base_ok])

    exact = {("nvme0", "read"): "tier.nvme0.bytes_read", ("nvme0", "writ"): "tier.nvme0.bytes_written",
             ("s3", "read"): "tier.s3.bytes_read", ("s3", "writ"): "tier.s3.bytes_written",
             ("nvme1", "read"): "tier.nvme1.bytes_read", ("nvme1", "writ"): "tier.nvme1.bytes_written",
             ("hit", "ratio"): "cache.hit_ratio", ("hit",): "cache.hits", ("miss",): "cache.misses"}

    def stat_pick(st, *words):
        """Sum of the stats keys that contain every word (e.g. tier name and 'read');
        tierfs's exact key when the stats are in its format."""
        if exact.get(words) in st:
            return st[exact[words]]
        ks = [k for k in st if all(w in k.lower() for w in words)]
        return sum(st[k] for k in ks) if ks else None

    print()
    print("tierfs bench: state %.2f GiB + gradients %.2f GiB, RAM budget %.2f GiB, %d rank(s), "
          "%d steps, pipeline %s, dir %s" % (
              meta["state_bytes"] / 2**30, meta["state_bytes"] / 3 / 2**30, meta["ram_bytes"] / 2**30,
              meta["ranks"], meta["steps"], meta["pipeline"], meta["bench_dir"])
          + (", disk capped at %.2f GB/s (BENCH_DISK_BPS)" % (meta["disk_cap_Bps"] / 1e9)
             if meta.get("disk_cap_Bps") else "")
          + (", %g s of forward+backward compute per step (BENCH_COMPUTE; the floor and the model"
             " do not count it)" % meta["compute_s"] if meta.get("compute_s") else ""))
    if floor:
        print("disk: read %.2f GB/s, write %.2f GB/s, mixed read+write %.2f GB/s "
              "(O_DIRECT, 1 MiB, qd8; mean of the probes before and after the runs)" % (
                  floor["read_Bps"] / 1e9, floor["write_Bps"] / 1e9, floor["mixed_Bps"] / 1e9))
    hdr = "%-10s %-3s %-8s %9s %9s %9s %8s %8s %7s %7s %7s %7s %7s  %s" % (
        "setup", "rep", "init s", "update s", "backward", "cpu s", "disk rd", "disk wr",
        "hit", "speedup", "bwd x", "/floor", "/model", "status")
    print(hdr)
    print("-" * len(hdr))
    for r in runs:
        upd, bwd = r.get("update_mean_s"), r.get("backward_mean_s")
        st = r.get("tierfs_stats") or {}
        if r["setup"] in ("baseline", "mlp", "upd_plain"):  # plain directories
            drd, dwr = r.get("bytes_read_per_step"), r.get("bytes_written_per_step")
            hit = None
        else:
            # disk tier bytes per step: read in the update phase, written in
            # it and in its backward (write-back runs on); mean over the
            # steps the update time is averaged over
            # (tierfs2p: both persistent paths)
            rds, wrs = [], []
            tiers = setup_tiers(r["setup"])
            for sb, su in r.get("tierfs_steps") or []:
                xs = [stat_pick(su, t, "read") for t in tiers]
                ys = [stat_pick(su, t, "writ") for t in tiers] + [stat_pick(sb, t, "writ") for t in tiers]
                if None not in xs:
                    rds.append(sum(xs))
                if None not in ys:
                    wrs.append(sum(ys))
            drd = mean(rds) if rds else None
            dwr = mean(wrs) if wrs else None
            r["disk_read_per_step"], r["disk_written_per_step"] = drd, dwr
            # The cache's own counter counts every request (writes too), so
            # it is kept apart; the column is Belady's measure: the share of
            # the bytes the update phase read that did not come from the disk
            # (prefetched bytes count as disk bytes).
            chit = stat_pick(st, "hit", "ratio")
            hits, misses = stat_pick(st, "hit"), stat_pick(st, "miss")
            if chit is None and hits is not None and misses is not None and hits + misses > 0:
                chit = hits / (hits + misses)
            r["cache_hit_ratio"] = chit
            app_rd = r.get("bytes_read_per_step")
            hit = 1 - drd / app_rd if drd is not None and app_rd else None
        r["speedup"] = base_upd / upd if base_upd and upd else None
        r["backward_speedup"] = base_bwd / bwd if base_bwd and bwd else None
        # A run with a second path has its own floor and model: the same
        # bytes over both paths' bandwidths.
        fl = floor2p if r["setup"] in TWO_PATHS else floor
        if r["setup"].startswith("upd_") or r["setup"] == S3_SETUP:
            fl = None  # upd_: the floor and the model are the replay's; s3: no floor measured
        r["ratio_to_floor"] = upd / fl["floor_s"] if fl and upd and fl["floor_s"] else None
        pipe = fl.get("pipeline_s") if fl else None
        r["ratio_to_pipeline"] = upd / pipe if pipe and upd else None
        r["hit_ratio"] = hit
        f2 = lambda x, p="%.3f": "-" if x is None else p % x
        print("%-10s %-3d %-8s %9s %9s %9s %8s %8s %7s %7s %7s %7s %7s  %s" % (
            r["setup"], r["rep"], f2(r.get("init_s"), "%.2f"), f2(upd), f2(bwd),
            f2(mean(r.get("update_cpu_s") or [])), fmt_bytes(drd), fmt_bytes(dwr),
            f2(hit, "%.3f"), f2(r["speedup"], "%.2fx"), f2(r["backward_speedup"], "%.2fx"),
            f2(r["ratio_to_floor"], "%.2f"), f2(r["ratio_to_pipeline"], "%.2f"), r["status"]))
    if floor:
        pg = floor["pinned_gradients"]
        print("floor (Belady, RAM %.2f GiB = %d blocks of %d): disk read %s + write %s per step "
              "= %.3f s I/O, CPU %.3f s -> floor %.3f s; Belady hit ratio %.3f "
              "(gradients pinned: read %s + write %s, hit %.3f)" % (
                  floor["ram_bytes"] / 2**30, floor["ram_blocks"], floor["blocks"],
                  fmt_bytes(floor["disk_read_bytes"]), fmt_bytes(floor["disk_write_bytes"]),
                  floor["floor_io_s"], floor["update_cpu_s"], floor["floor_s"],
                  floor["hit_ratio"], fmt_bytes(pg["disk_read_bytes"]),
                  fmt_bytes(pg["disk_write_bytes"]), pg["hit_ratio"]))
    if floor and floor.get("pipeline_s"):
        pm = floor["pipeline"]
        what = {"lockstep": "the lockstep pipelined schedule",
                "deepspeed": "DeepSpeed's pipelined order"}.get(pm.get("schedule"), "the schedule")
        print("model (%s with the same disk and RAM, %d blocks beside the gradients): %.3f s = "
              "%.2fx the floor; reads or writes alone at the head and the tail of a step, and "
              "the waits of the order, whatever the policy (scripts/bench_report.py explains "
              "it)" % (what, pm["credit_blocks"], floor["pipeline_s"],
                       floor["pipeline_s"] / floor["floor_s"]))
    if floor2p:
        print("two paths (disk + second path): read %.2f GB/s, write %.2f GB/s, mixed %.2f GB/s -> "
              "floor %.3f s%s" % (
                  floor2p["read_Bps"] / 1e9, floor2p["write_Bps"] / 1e9, floor2p["mixed_Bps"] / 1e9,
                  floor2p["floor_s"],
                  ", model %.3f s" % floor2p["pipeline_s"] if floor2p.get("pipeline_s") else ""))
    if any(r["setup"] == "tierfs" for r in runs):
        print("tierfs columns: disk rd/wr = tier nvme0 bytes per step (from .tierfs/stats, mean over the steps the update time averages), "
              "hit = 1 - disk bytes read / bytes the update phase read (Belady's measure)")
    if any(r["setup"] == "tierfs2p" for r in runs):
        print("tierfs2p: the tierfs mount with a second persistent path in the stripe, %s capped at "
              "%s/s each way (standing in for a parallel file system beside the disk); disk rd/wr = both paths; "
              "speedup against the same single-disk baseline" % (meta.get("t2_dir", "BENCH_T2_DIR"),
                                                                 meta.get("t2_cap", "BENCH_T2_CAP")))
    app_notes(runs, meta)
    s3_note(runs, meta)
    if two:
        print("two tiers (%s): striped read %s vs sum of tiers %.2f GB/s -> %s  %s" % (
            ", ".join(two.get("tiers", [])),
            "-" if two.get("striped_read_Bps") is None else "%.2f GB/s" % (two["striped_read_Bps"] / 1e9),
            two["sum_Bps"] / 1e9,
            "-" if two.get("striped_read_Bps") is None else "%.0f%%" % (100 * two["striped_read_Bps"] / two["sum_Bps"]),
            two.get("status", "")))
    print("(update/backward: mean over steps 3..N, 1 and 2 warm up (2..N when N < 4), and on tierfs every "
          "step up to the first that began with the order learned (the `steps K-N` below); speedup vs the "
          "baseline mean; bwd x = backward speedup; /floor, /model = update time over the floor, over the "
          "model)")
    # Where a tierfs run's update phase waits: the share of it each side of
    # each persistent tier had I/O queued or in flight, and the metadata
    # commits made meanwhile (same steps as the update time).
    busy_lines = []
    for r in runs:
        if not r["setup"].startswith("tierfs") or not r.get("tierfs_steps"):
            continue
        upd = (r.get("update_s") or [])[-len(r["tierfs_steps"]):]
        tiers = setup_tiers(r["setup"])
        parts = []
        r["disk_busy"] = {}
        for t in tiers:
            fr = {}
            for side in ("read", "write"):
                xs = [su.get("tier.%s.busy_%s_ms" % (t, side)) for _, su in r["tierfs_steps"]]
                xs = [x / 1000 / u for x, u in zip(xs, upd) if x is not None and u]
                fr[side] = mean(xs) if xs else None
            if fr["read"] is None:
                continue
            r["disk_busy"][t] = fr
            parts.append("%s %.0f%% read, %.0f%% write" % (t, 100 * fr["read"], 100 * fr["write"]))
        com = [su.get("cache.commits") for _, su in r["tierfs_steps"]]
        cms = [su.get("cache.commit_ms") for _, su in r["tierfs_steps"]]
        forced = [su.get("cache.commits_forced") for _, su in r["tierfs_steps"]]
        if None not in com and None not in cms and com:
            r["commits_per_step"], r["commit_s_per_step"] = mean(com), mean(cms) / 1000
            parts.append("%.1f metadata commits (%.2f s%s)" % (
                r["commits_per_step"], r["commit_s_per_step"],
                ", %.1f forced" % mean(forced) if None not in forced else ""))
        # each averaged step's own time: a one-off (the step gap mode
        # begins in, a commit) shows apart from the steady ones
        parts.append("steps %d-%d: %s" % (r.get("warm_steps", 0) + 1, len(r.get("update_s") or []),
                                          " ".join("%.2f" % u for u in upd)))
        if parts:
            busy_lines.append("  %s %d: %s" % (r["setup"], r["rep"], "; ".join(parts)))
    if busy_lines:
        print("busy during the update phase (.tierfs/stats busy_*_ms over the update time, per step; "
              "a side below 100% while the step waits was not what it waited for):")
        print("\n".join(busy_lines))

    tf_ok = [r for r in runs if r["setup"] == "tierfs" and r["status"] == "ok"]
    t2p_ok = [r for r in runs if r["setup"] == "tierfs2p" and r["status"] == "ok"]
    summary = {
        "meta": meta,
        "baseline": {"update_s": base_upd, "backward_s": base_bwd},
        "tierfs": {
            "update_s": mean([r["update_mean_s"] for r in tf_ok]),
            "backward_s": mean([r["backward_mean_s"] for r in tf_ok]),
            "speedup": mean([r["speedup"] for r in tf_ok]),
            "backward_speedup": mean([r["backward_speedup"] for r in tf_ok]),
            "ratio_to_floor": mean([r["ratio_to_floor"] for r in tf_ok]),
            "ratio_to_pipeline": mean([r["ratio_to_pipeline"] for r in tf_ok]),
            "hit_ratio": mean([r["hit_ratio"] for r in tf_ok]),
        } if tf_ok else None,
        "tierfs2p": {
            "update_s": mean([r["update_mean_s"] for r in t2p_ok]),
            "backward_s": mean([r["backward_mean_s"] for r in t2p_ok]),
            "speedup": mean([r["speedup"] for r in t2p_ok]),
            "backward_speedup": mean([r["backward_speedup"] for r in t2p_ok]),
            "ratio_to_floor": mean([r["ratio_to_floor"] for r in t2p_ok]),
            "ratio_to_pipeline": mean([r["ratio_to_pipeline"] for r in t2p_ok]),
            "hit_ratio": mean([r["hit_ratio"] for r in t2p_ok]),
        } if t2p_ok else None,
        **app_summary(runs),
        S3_SETUP: s3_summary(runs),
        "floor": floor,
        "floor2p": floor2p,
        "two_tier": two,
        "runs": [{k: v for k, v in r.items() if k != "replay"} for r in runs],
    }
    with open(os.path.join(d, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    # steps.dat: one gnuplot data block per run: step, update s, backward s
    with open(os.path.join(d, "steps.dat"), "w") as f:
        for r in runs:
            if "update_s" not in r:
                continue
            f.write("# %s-%d\n" % (r["setup"], r["rep"]))
            for i, (u, b) in enumerate(zip(r["update_s"], r["backward_s"])):
                f.write("%d %.6f %.6f\n" % (i + 1, u, b))
            f.write("\n\n")
    with open(os.path.join(d, "steps.titles"), "w") as f:
        f.write(" ".join("%s-%d" % (r["setup"], r["rep"]) for r in runs if "update_s" in r))
    with open(os.path.join(d, "floor.val"), "w") as f:
        f.write("%.6f" % (floor["floor_s"] if floor else 0))
    with open(os.path.join(d, "model.val"), "w") as f:
        f.write("%.6f" % (floor.get("pipeline_s") or 0 if floor else 0))


# ---- the application changed instead: MLP-Offload's scheme, the updater ------------

# setups of scripts/bench.sh's step 5: the replay's MLP-style scheme on two
# plain directories, tierfs-update on the plain disk directory and on the
# two-path mount
APP_SETUPS = ("mlp", "upd_plain", "upd_mount")
TWO_PATHS = ("tierfs2p", "mlp", "upd_mount")


def app_warm(setup, nsteady, warm):
    """Warm-up steps of an application-side run: the MLP-style replay as the
    others (its first step reads what later ones keep); the updater's first
    half, as a mount learns its alternating order's two-step cycle in about
    the fifth step."""
    if setup.startswith("upd_"):
        return max(warm, nsteady // 2)
    return warm


def app_summary(runs):
    """summary.json keys of the application-side setups, and the three
    choices side by side (None where a setup did not run or failed)."""
    out = {}
    for setup in APP_SETUPS:
        ok = [r for r in runs if r["setup"] == setup and r["status"] == "ok"]
        out[setup] = {
            "update_s": mean([r["update_mean_s"] for r in ok]),
            "speedup": mean([r.get("speedup") for r in ok]),
            "ratio_to_floor": mean([r.get("ratio_to_floor") for r in ok]),
            "bytes_read_per_step": mean([r.get("bytes_read_per_step") for r in ok]),
            "bytes_written_per_step": mean([r.get("bytes_written_per_step") for r in ok]),
        } if ok else None
        if ok and setup == "mlp":
            out[setup]["backward_s"] = mean([r["backward_mean_s"] for r in ok])
            out[setup]["scheme"] = ok[0]["replay"].get("mlp")
        if ok and setup.startswith("upd_"):
            out[setup]["keep"] = ok[0]["replay"].get("keep")
    pick = lambda k: mean([r["update_mean_s"] for r in runs if r["setup"] == k and r["status"] == "ok"])
    out["choices"] = {"filesystem only": pick("tierfs2p"), "updater only": pick("upd_plain"),
                      "both": pick("upd_mount"), "MLP-style application": pick("mlp")}
    return out


def app_notes(runs, meta):
    """The report's lines on the application-side setups."""
    have = {r["setup"] for r in runs}
    mlp = [r for r in runs if r["setup"] == "mlp" and r.get("replay", {}).get("mlp")]
    if mlp:
        m = mlp[0]["replay"]["mlp"]
        print("mlp: MLP-Offload's scheme in the replay (tierfs-replay --mlp) on the plain disk "
              "directory and %s capped at %s/s: sub-group i on the %s when i %% %d == 0 (ratio "
              "chosen for %.2f and %.2f GB/s), alternating order, %d sub-group(s) kept in host "
              "buffers, gradients bf16 in host memory, one rank reading and one writing at a time; "
              "/floor and /model: the two-path ones; speedup against the single-disk baseline" % (
                  meta.get("t2_dir", "BENCH_T2_DIR"), meta.get("t2_cap", "BENCH_T2_CAP"),
                  "disk" if m["minor_path"] == "dir" else "second path", m["ratio"],
                  m["path_Bps"][0] / 1e9, m["path_Bps"][1] / 1e9, m["keep"]))
    upd = {r["setup"]: r for r in runs if r["setup"].startswith("upd_") and r.get("replay")}
    if upd:
        keep = upd["upd_plain"]["replay"].get("keep") if "upd_plain" in upd else None
        print("upd_plain: tierfs-update --order alternating%s on the plain disk directory (it takes "
              "one directory); upd_mount: the same on the two-path mount, nothing kept by the "
              "updater (the RAM is the mount's); DeepSpeed's files, no backward phase; the updater "
              "fdatasyncs every file it writes; first half of its steps not averaged; no floor (the floor "
              "and the model are the replay's)" % (
                  " --keep %d (what BENCH_RAM holds)" % keep if keep is not None else ""))
    if have & {"tierfs2p", "upd_plain", "upd_mount", "mlp"}:
        f = lambda k: "-" if k not in have else "%s s" % (
            "%.3f" % mean([r["update_mean_s"] for r in runs if r["setup"] == k and r.get("update_mean_s")])
            if any(r["setup"] == k and r.get("update_mean_s") for r in runs) else "-")
        print("which to pick (update phase): filesystem only (DeepSpeed on tierfs, tierfs2p) %s; "
              "updater only (upd_plain) %s; both (upd_mount) %s; MLP-style application (mlp) %s" % (
                  f("tierfs2p"), f("upd_plain"), f("upd_mount"), f("mlp")))


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("floor", "report"):
        sys.stderr.write(__doc__)
        return 2
    if sys.argv[1] == "floor":
        cmd_floor(sys.argv[2:])
    else:
        cmd_report(sys.argv[2:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
