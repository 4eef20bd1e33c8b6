"""One rank of the end-to-end check: a small transformer language model
trained by DeepSpeed ZeRO stage 3 with both the optimizer state and the
parameters swapped to NVMe files under --nvme-path.

Everything that could make two runs differ is pinned down: the seeds, the
data (random tokens drawn from a generator seeded per step and rank), one
intra-op thread on the CPU, deterministic algorithms. Two runs that differ
only in the directory under nvme_path must therefore print the same loss,
bit for bit, and leave byte-identical swap files; scripts/e2e/run.py
compares them.

Started by run.py, once per rank, with RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR and MASTER_PORT in the environment. Writes a JSON file per rank
(--out-dir/rank-N.json) with DeepSpeed's version, each step's loss (as
float.hex, exact) and its time.
"""
import argparse
import json
import os
import sys
import time


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--nvme-path", required=True, help="directory DeepSpeed swaps to")
    p.add_argument("--out-dir", required=True, help="where rank-N.json goes")
    p.add_argument("--block-size", type=int, default=1 << 20, help="aio block_size: the mount's")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--pipeline", action="store_true", help="offload_optimizer pipeline_read/pipeline_write")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--batch", type=int, default=2, help="sequences per rank and step")
    p.add_argument("--sub-group", type=int, default=1 << 21, help="ZeRO sub_group_size (elements)")
    return p.parse_args()


def main():
    args = parse_args()
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    cuda = os.environ.get("DS_ACCELERATOR") == "cuda"
    if cuda:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cudnn.benchmark = False
        torch.backends.cuda.matmul.allow_tf32 = False
    else:
        # One thread per rank: the same reduction order in every run.
        torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(args.seed)

    import deepspeed
    import deepspeed.comm as dist

    class Block(nn.Module):
        def __init__(self, dim, heads):
            super().__init__()
            self.heads = heads
            self.ln1 = nn.LayerNorm(dim)
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)
            self.ln2 = nn.LayerNorm(dim)
            self.fc1 = nn.Linear(dim, 4 * dim)
            self.fc2 = nn.Linear(4 * dim, dim)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            att = (q @ k.transpose(-2, -1)) * (d // self.heads) ** -0.5
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            att = att.masked_fill(mask, float("-inf")).softmax(-1)
            x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(args.vocab, args.dim)
            self.pos = nn.Embedding(args.seq, args.dim)
            self.blocks = nn.ModuleList(Block(args.dim, args.heads) for _ in range(args.layers))
            self.ln = nn.LayerNorm(args.dim)
            self.head = nn.Linear(args.dim, args.vocab, bias=False)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln(x))

    block = args.block_size
    largest = max(args.vocab * args.dim, 4 * args.dim * args.dim)
    config = {
        "train_micro_batch_size_per_gpu": args.batch,
        "gradient_accumulation_steps": 1,
        "steps_per_print": 1 << 30,
        "wall_clock_breakdown": False,
        "bf16": {"enabled": True},
        "optimizer": {"type": "Adam", "params": {"lr": 1e-3, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.0}},
        "zero_optimization": {
            "stage": 3,
            "sub_group_size": args.sub_group,
            "stage3_param_persistence_threshold": 0,
            "stage3_max_live_parameters": largest,
            "stage3_prefetch_bucket_size": largest,
            "offload_param": {
                "device": "nvme",
                "nvme_path": args.nvme_path,
                "buffer_count": 6,
                "buffer_size": largest,
                "max_in_cpu": 0,
            },
            "offload_optimizer": {
                "device": "nvme",
                "nvme_path": args.nvme_path,
                # Pipelined, a sub-group being read and one being written
                # hold their buffers beside the one being updated.
                "buffer_count": 12 if args.pipeline else 4,
                "pipeline_read": args.pipeline,
                "pipeline_write": args.pipeline,
            },
        },
        "aio": {
            "block_size": block,
            "queue_depth": 8,
            "intra_op_parallelism": 1,
            "single_submit": False,
            "overlap_events": True,
        },
    }

    deepspeed.init_distributed()
    rank = dist.get_rank()
    model = LM()
    n_params = sum(p.numel() for p in model.parameters())
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    device = engine.device

    losses, times = [], []
    for step in range(args.steps):
        g = torch.Generator().manual_seed(args.seed * 1000003 + step * 101 + rank)
        tokens = torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=g).to(device)
        dist.barrier()
        t0 = time.perf_counter()
        logits = engine(tokens[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, args.vocab), tokens[:, 1:].reshape(-1))
        engine.backward(loss)
        engine.step()
        if cuda:
            torch.cuda.synchronize()
        dist.barrier()
        times.append(time.perf_counter() - t0)
        losses.append(float(loss.detach().float().cpu()).hex())
        if rank == 0:
            print(f"step {step:3d} loss {float.fromhex(losses[-1]):.6f} {times[-1]:.2f} s", file=sys.stderr, flush=True)

    dist.barrier()
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, f"rank-{rank}.json"), "w") as f:
        json.dump({
            "deepspeed": deepspeed.__version__,
            "torch": torch.__version__,
            "accelerator": os.environ.get("DS_ACCELERATOR", ""),
            "params": n_params,
            "losses": losses,
            "step_s": times,
        }, f)
    # Every swap write is awaited before the process ends: the run's files
    # are compared once both ranks have exited.
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
