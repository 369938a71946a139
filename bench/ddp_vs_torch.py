#!/usr/bin/env python3
"""Data-parallel training of the main job's MLP (784-256-10, ReLU, softmax
cross-entropy, SGD with momentum 0.9 and a cosine learning rate) on 2 ranks:
eagervm's nn.parallel.DistributedDataParallel over MPI (eagervm.distributed)
against PyTorch's DistributedDataParallel over gloo, both started by mpirun
with one core a rank (--bind-to core; 1 eagervm intra-op thread, 1 PyTorch
thread, 1 OpenBLAS thread).

    python3 bench/ddp_vs_torch.py [--steps 300] [--rounds 5] [--batch-size 64]

Both sides start from the same weights and run the same steps on the same
prepared batches (a seeded shuffle of Fashion-MNIST's training set): global
batch k is split between the ranks by taking every second row (the way
DistributedSampler shards), --batch-size rows a rank. Rounds alternate
(eagervm, PyTorch, eagervm, ...), one mpirun each; each round runs --warmup
untimed steps, --steps timed ones (between two barriers and host waits), and
--profile-steps more under eagervm's profiler (PyTorch runs them untimed), so
both sides train the same number of steps; then rank 0 tests the model. It
prints the medians of the global samples/s, their ratio (target: eagervm >=
1.5x), each side's test accuracy, and from eagervm's profile the share of
all-reduce time hidden behind backward (the time of the ccl stream's
all-reduce intervals that lies inside a backward window, the first to the
last backward instruction of a step, over all all-reduce time; target 80%).

--bucket-cap-mb (default 25,0.01) lists the bucket sizes to run, each on
both sides: 25 MB (PyTorch's default) puts the whole 0.8 MB model into one
bucket, reduced once backward is over (nothing to overlap); 0.01 MB gives
eagervm (layer 2), (layer 1's bias), (layer 1's weight) and PyTorch its own
split of the same size, the first two reducible while backward goes on.

eagervm's step runs on the default thread (--train-thread: on an
asyncs.Thread of its own).
"""
import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
WORLD = 2


# ------------------------------------------------------------ the launcher

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prepare(path, args):
    """The data both sides read: the raw images, a seeded shuffle cut into
    the global batches, the test set."""
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import numpy as np
    from eagervm.datasets import mnist
    train_x, train_y = mnist.load_fashion_mnist("train")
    test_x, test_y = mnist.load_fashion_mnist("test")
    total = args.warmup + args.steps + args.profile_steps
    gb = args.batch_size * WORLD
    rng = np.random.default_rng(args.seed)
    n = train_x.shape[0]
    idx = np.concatenate([rng.permutation(n) for _ in range(-(-total * gb // n))])
    np.savez(path, images=train_x.numpy().astype(np.uint8),
             labels=train_y.numpy().astype(np.int64), idx=idx[:total * gb].reshape(total, gb),
             test_images=test_x.numpy().astype(np.uint8),
             test_labels=test_y.numpy().astype(np.int64))


def launch(side, data, out, cap, args):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"),
               EAGERVM_INTRAOP_THREADS="1", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               OMP_WAIT_POLICY="PASSIVE", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(free_port()))
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(WORLD)]
    if args.bind:
        cmd += ["--bind-to", "core"]
    cmd += [sys.executable, os.path.abspath(__file__)] + sys.argv[1:] + [
        "--worker", side, "--data", data, "--result", out, "--bucket-cap-mb", str(cap)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    if r.returncode:
        sys.exit(f"ddp_vs_torch: the {side} round failed:\n{r.stdout}\n{r.stderr}")
    with open(out) as f:
        return json.load(f)


def main_launcher(args):
    caps = [float(c) for c in args.bucket_cap_mb.split(",")]
    with tempfile.TemporaryDirectory(prefix="ddp_vs_torch") as tmp:
        data = os.path.join(tmp, "data.npz")
        prepare(data, args)
        for cap in caps:
            print(f"bucket_cap_mb={cap:g}:", flush=True)
            runs = {"eagervm": [], "torch": []}
            for k in range(args.rounds):
                for side in (("eagervm", "torch") if k % 2 == 0 else ("torch", "eagervm")):
                    res = launch(side, data, os.path.join(tmp, f"{side}{k}.json"), cap, args)
                    runs[side].append(res)
                    print(f"  round {k + 1} {side:<8} {res['samples_per_s']:>10,.0f} samples/s"
                          f"  accuracy {res['accuracy']:.4f}"
                          + (f"  overlap {res['overlap']:.0%}" if "overlap" in res else ""),
                          flush=True)
            summary(runs, cap, args)


def summary(runs, cap, args):
    torch_version = runs["torch"][0]["version"]
    med = {s: statistics.median(r["samples_per_s"] for r in runs[s]) for s in runs}
    total = args.warmup + args.steps + args.profile_steps
    print(f"2 ranks, {args.batch_size} images a rank a step (global batch "
          f"{args.batch_size * WORLD}), {args.steps} timed steps of {total} a round, "
          f"{args.rounds} rounds alternating, bucket_cap_mb={cap:g}"
          f"{', bound to a core a rank' if args.bind else ''}")
    for side, label in (("eagervm", "eagervm DDP (MPI)"),
                        ("torch", f"PyTorch {torch_version} DDP (gloo)")):
        accs = sorted({round(r["accuracy"], 4) for r in runs[side]})
        print(f"  {label:<28} {med[side]:>10,.0f} samples/s   test accuracy "
              f"{', '.join(f'{a:.4f}' for a in accs)} after {total} steps")
    print(f"eagervm / PyTorch DDP: {med['eagervm'] / med['torch']:.2f}x (target 1.5x)")
    ov = [r["overlap"] for r in runs["eagervm"]]
    ar = [r["all_reduce_ms_per_step"] for r in runs["eagervm"]]
    bw = [r["backward_ms_per_step"] for r in runs["eagervm"]]
    bound = [r["overlap_bound"] for r in runs["eagervm"]]
    print(f"eagervm all-reduce time hidden behind backward: {statistics.median(ov):.0%} "
          f"(median; target 80%); at most {statistics.median(bound):.0%} could be (all but "
          f"the last bucket's, whose gradient is backward's last result); per step: "
          f"all-reduce {statistics.median(ar):.3f} ms, backward window "
          f"{statistics.median(bw):.3f} ms; buckets {runs['eagervm'][0]['buckets']}\n",
          flush=True)


# ------------------------------------------------------------ the workers

def shard(d, rank, lr_steps):
    """This rank's rows of each global batch: normalised images and labels."""
    import numpy as np
    mean, std = 0.2860, 0.3530
    images, labels = d["images"], d["labels"]
    out = []
    for k in range(lr_steps):
        rows = d["idx"][k][rank::WORLD]
        x = (images[rows].astype(np.float32) * (1 / (255 * std)) - mean / std)
        out.append((x.astype(np.float32), labels[rows]))
    return out


def initial_weights(seed):
    """The main job's initial weights (examples/fashion_mnist.py), in NumPy."""
    import numpy as np
    rng = np.random.default_rng(seed)
    b1, b2 = 1 / np.sqrt(784), 1 / np.sqrt(256)
    return [rng.uniform(-b1, b1, (784, 256)), rng.uniform(-b1, b1, 256),
            rng.uniform(-b2, b2, (256, 10)), rng.uniform(-b2, b2, 10)]


def overlap(prof):
    """From a profile of whole steps: (share of all-reduce time inside a
    backward window, the share that could be at best: all but the last
    bucket's, all-reduce ns, backward-window ns, steps). A window runs from
    the start of the first to the end of the last backward instruction of a
    step: a run of backward instructions on the training worker's stream, in
    issue order (each worker numbers its own)."""
    back = [e for e in prof.events if e.stream_type == "compute" and e.function and
            e.function.endswith("_backward")]
    if not back:
        return 0.0, 0.0, 0, 0, 0
    uid = max({e.thread_uid for e in back}, key=[e.thread_uid for e in back].count)
    mine = sorted((e for e in prof.events if e.stream_type == "compute" and
                   e.thread_uid == uid), key=lambda e: e.seq)
    windows, cur = [], None
    for e in mine:
        if e.function and e.function.endswith("_backward"):
            cur = [e.start_ns, e.end_ns] if cur is None else \
                [min(cur[0], e.start_ns), max(cur[1], e.end_ns)]
        elif cur is not None and e.function is not None:
            # An op of the program (forward, optimizer) ends the window; a
            # release the engine issued between two backward ops (no
            # function) does not.
            windows.append(cur)
            cur = None
    if cur is not None:
        windows.append(cur)
    ars = sorted((e for e in prof.events if e.stream_type == "ccl" and "all_reduce" in e.name),
                 key=lambda e: e.seq)
    total = inside = last = 0
    for e in ars:
        total += e.end_ns - e.start_ns
        for lo, hi in windows:
            inside += max(0, min(hi, e.end_ns) - max(lo, e.start_ns))
    # The last bucket of each step: its gradient is backward's last result.
    per_step = len(ars) // max(1, len(windows))
    if per_step:
        last = sum(e.end_ns - e.start_ns for e in ars[per_step - 1::per_step])
    return (inside / total if total else 0.0, 1 - last / total if total else 0.0, total,
            sum(hi - lo for lo, hi in windows), len(windows))


def worker_eagervm(args):
    import numpy as np
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import eagervm as ev
    import eagervm.distributed as dist
    from eagervm import nn, optim
    dist.init_process_group()
    rank = dist.get_rank()
    d = np.load(args.data)
    total = args.warmup + args.steps + args.profile_steps
    batches = [(ev.from_numpy(x), ev.from_numpy(t)) for x, t in shard(d, rank, total)]
    net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    init = initial_weights(args.seed)
    with ev.no_grad():
        for p, a in zip(net.parameters(), (init[0].T, init[1], init[2].T, init[3])):
            p.copy_(ev.from_numpy(np.ascontiguousarray(a, dtype=np.float32)))
    model = nn.parallel.DistributedDataParallel(net, bucket_cap_mb=float(args.bucket_cap_mb))
    loss_fn = nn.CrossEntropyLoss()
    opt = optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total)

    train = ev.asyncs.Thread() if args.train_thread else None

    def step(x, t):
        with ev.asyncs.thread(train) if train is not None else contextlib.nullcontext():
            opt.zero_grad()
            loss_fn(model(x), t).backward()
            opt.step()
            sched.step()

    for x, t in batches[:args.warmup]:
        step(x, t)
    dist.barrier()
    ev.synchronize()
    t0 = time.perf_counter()
    for x, t in batches[args.warmup:args.warmup + args.steps]:
        step(x, t)
    dist.barrier()
    ev.synchronize()
    secs = time.perf_counter() - t0
    with ev.profiler.profile() as prof:
        for x, t in batches[args.warmup + args.steps:]:
            step(x, t)
        ev.synchronize()
    share, best, ar_ns, bw_ns, nwin = overlap(prof)
    res = {"samples_per_s": args.steps * args.batch_size * WORLD / secs, "overlap": share,
           "overlap_bound": best,
           "all_reduce_ms_per_step": ar_ns / 1e6 / max(1, args.profile_steps),
           "backward_ms_per_step": bw_ns / 1e6 / max(1, nwin), "buckets": model.bucket_layout()}
    if rank == 0:
        with ev.no_grad():
            x = ev.from_numpy(d["test_images"].astype(np.float32)) * (1 / (255 * 0.3530)) - \
                0.2860 / 0.3530
            hit = (ev.argmax(net(x), dim=1) == ev.from_numpy(d["test_labels"])).sum().item()
        res["accuracy"] = hit / d["test_labels"].shape[0]
        with open(args.result, "w") as f:
            json.dump(res, f)
    dist.destroy_process_group()


def worker_torch(args):
    import numpy as np
    import torch
    import torch.distributed as tdist
    torch.set_num_threads(1)
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    tdist.init_process_group("gloo", init_method="env://", rank=rank,
                             world_size=int(os.environ["OMPI_COMM_WORLD_SIZE"]))
    d = np.load(args.data)
    total = args.warmup + args.steps + args.profile_steps
    batches = [(torch.from_numpy(x), torch.from_numpy(t)) for x, t in shard(d, rank, total)]
    net = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                              torch.nn.Linear(256, 10))
    init = initial_weights(args.seed)
    with torch.no_grad():
        for p, a in zip(net.parameters(), (init[0].T, init[1], init[2].T, init[3])):
            p.copy_(torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)))
    model = torch.nn.parallel.DistributedDataParallel(net,
                                                      bucket_cap_mb=float(args.bucket_cap_mb))
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total)

    def step(x, t):
        opt.zero_grad()
        loss_fn(model(x), t).backward()
        opt.step()
        sched.step()

    for x, t in batches[:args.warmup]:
        step(x, t)
    tdist.barrier()
    t0 = time.perf_counter()
    for x, t in batches[args.warmup:args.warmup + args.steps]:
        step(x, t)
    tdist.barrier()
    secs = time.perf_counter() - t0
    for x, t in batches[args.warmup + args.steps:]:
        step(x, t)
    res = {"samples_per_s": args.steps * args.batch_size * WORLD / secs,
           "version": torch.__version__}
    if rank == 0:
        with torch.no_grad():
            x = torch.from_numpy(d["test_images"].astype(np.float32)) * (1 / (255 * 0.3530)) \
                - 0.2860 / 0.3530
            res["accuracy"] = (net(x).argmax(1) == torch.from_numpy(d["test_labels"])) \
                .float().mean().item()
        with open(args.result, "w") as f:
            json.dump(res, f)
    tdist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch-size", type=int, default=64, help="images a rank a step")
    ap.add_argument("--steps", type=int, default=300, help="timed steps a round")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--profile-steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5, help="rounds a side, alternating")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bucket-cap-mb", default="25,0.01",
                    help="bucket sizes to run, comma-separated (default %(default)s)")
    ap.add_argument("--no-bind", dest="bind", action="store_false",
                    help="do not pass --bind-to core to mpirun")
    ap.add_argument("--train-thread", action="store_true",
                    help="eagervm trains on an asyncs.Thread of its own, not on the default")
    ap.add_argument("--timeout", type=float, default=300, help="seconds a round may take")
    ap.add_argument("--worker", choices=("eagervm", "torch"), help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args()
    try:
        caps = [float(c) for c in args.bucket_cap_mb.split(",")]
    except ValueError:
        caps = [0]
    if min(args.batch_size, args.steps, args.rounds, args.profile_steps) < 1 or \
            args.warmup < 0 or not all(c > 0 for c in caps):
        ap.error("--batch-size, --steps, --rounds, --profile-steps and --bucket-cap-mb must "
                 "be positive, --warmup >= 0")
    if args.worker == "eagervm":
        worker_eagervm(args)
    elif args.worker == "torch":
        worker_torch(args)
    else:
        main_launcher(args)


if __name__ == "__main__":
    main()
