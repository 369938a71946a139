#!/usr/bin/env python3
"""Trains a 784-256-10 MLP on Fashion-MNIST with eagervm, the input pipeline
on its own worker thread.

    python3 examples/fashion_mnist.py [--epochs 5] [--out DIR] [--save CKPT] [--resume CKPT]
    mpirun --allow-run-as-root --oversubscribe -np 2 /usr/bin/python3 \
        examples/fashion_mnist.py --distributed

The data are the real Fashion-MNIST IDX files of Debian's
dataset-fashion-mnist package, read by eagervm.datasets.mnist. The model is
an eagervm.nn.Sequential of Linear, ReLU and Linear layers, trained with
nn.CrossEntropyLoss, autograd and optim.SGD with momentum, under a cosine
learning-rate schedule (optim.lr_scheduler.CosineAnnealingLR, stepped each
batch). --save writes a checkpoint (model, optimizer, schedule, the loader's
random state and the epochs done) in the safetensors format after each
epoch; --resume continues from one, to the same result as an unbroken run.

The input pipeline (shuffle each epoch with eagervm.randperm, gather the
shuffled batch, normalise, randomly flip each image left-right) is issued
under `with eagervm.asyncs.thread(loader)`, so it runs on the worker `loader`,
while the training step runs on the default worker. There is no explicit
synchronisation: the runtime orders it. The loader writes each finished batch
into one slot of a ring of `prefetch + 1` slots that the training step reads;
writing slot k again must wait until the step that read it is done (a
write-after-read edge the runtime adds by itself), so the loader runs at most
`prefetch` batches ahead of training.

It prints progress, the test accuracy and the throughput, and writes a
profile of one epoch: a Chrome trace (open it in https://ui.perfetto.dev) and
a timeline picture with one lane per worker.

NumPy is used only for one-off preparation: the seeded random numbers of the
initial weights and of each epoch's flip coins. Each epoch's permutation is
eagervm.randperm from a counter-based generator, issued on the loader's
worker (its values depend only on the seed and the call order, so runs
repeat). Everything done per batch is eagervm ops.

--distributed trains data-parallel over eagervm.distributed, one process a
rank (start it with mpirun): the model is wrapped in
nn.parallel.DistributedDataParallel (gradients averaged over the ranks,
bucket by bucket while backward goes on), and each rank takes every
world-size-th index of the epoch's permutation (datasets.DistributedSampler;
the permutation and the coin flips are the same on every rank) in batches of
batch-size / world-size, so that the ranks' k-th batches together are the
one-process run's k-th batch: the same global batch, the same steps and
learning rates. Each rank computes on one core (EAGERVM_INTRAOP_THREADS,
OPENBLAS_NUM_THREADS and OMP_NUM_THREADS default to 1); rank 0 prints the
progress, the accuracy and the throughput (global samples/s), and alone
writes the checkpoint and the profile.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
_CHECKOUT = os.path.normpath(os.path.join(HERE, "..", "python"))
if os.path.isdir(os.path.join(_CHECKOUT, "eagervm")):
    sys.path.insert(0, _CHECKOUT)  # run from a checkout: use its in-place build
if __name__ == "__main__" and "--distributed" in sys.argv:
    # One core a rank: read by eagervm and OpenBLAS when they start, so set
    # before the imports.
    for _var in ("EAGERVM_INTRAOP_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import eagervm as ev  # noqa: E402  (first: it tunes OpenBLAS before NumPy loads it)
import numpy as np  # noqa: E402
from eagervm import nn, optim  # noqa: E402
from eagervm.datasets import DistributedSampler, mnist  # noqa: E402

import eagervm.distributed as dist  # noqa: E402  (initialises nothing)

MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST's pixel mean and std (after / 255)
SIDE = 28
PIXELS = SIDE * SIDE
CLASSES = 10


# ------------------------------------------------------------------ model

def initial_weights(rng, hidden=256):
    """PyTorch's default init for nn.Linear, U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
    drawn from rng (so runs repeat): (784, h), (h,), (h, 10), (10,)."""
    b1, b2 = 1 / np.sqrt(PIXELS), 1 / np.sqrt(hidden)
    return [rng.uniform(-b1, b1, (PIXELS, hidden)), rng.uniform(-b1, b1, hidden),
            rng.uniform(-b2, b2, (hidden, CLASSES)), rng.uniform(-b2, b2, CLASSES)]


class MLP:
    """784-256-10, ReLU, softmax cross-entropy, SGD with momentum: an
    nn.Sequential trained by autograd and optim.SGD."""

    def __init__(self, rng, hidden=256, lr=0.05, momentum=0.9, steps=1, distributed=False,
                 bucket_cap_mb=25):
        self.net = nn.Sequential(nn.Linear(PIXELS, hidden), nn.ReLU(),
                                 nn.Linear(hidden, CLASSES))
        init = initial_weights(rng, hidden)
        with ev.no_grad():
            for p, a in zip(self.net.parameters(), (init[0].T, init[1], init[2].T, init[3])):
                p.copy_(ev.from_numpy(np.ascontiguousarray(a, dtype=np.float32)))
        # The checkpoint keeps the bare model's names, distributed or not.
        self.bare = self.net
        if distributed:
            # The default cap (25 MB) makes the whole 0.8 MB model one
            # bucket, reduced once backward is over: here one collective a
            # step costs less than the overlap of smaller buckets gains (0.01
            # MB gives (layer 2), (layer 1's bias), (layer 1's weight)).
            self.net = nn.parallel.DistributedDataParallel(self.net, bucket_cap_mb=bucket_cap_mb)
        self.loss_fn = nn.CrossEntropyLoss()
        self.opt = optim.SGD(self.net.parameters(), lr=lr, momentum=momentum)
        # From lr down to 0 at the last step.
        self.sched = optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=steps)

    def step(self, x, target):
        """One SGD step on batch x (B, 784) with class indices target (B,).
        Returns the batch's mean loss as a 0-d tensor (not waited for)."""
        self.opt.zero_grad()
        loss = self.loss_fn(self.net(x), target)
        loss.backward()
        self.opt.step()
        self.sched.step()
        return loss.detach()

    @ev.no_grad()
    def accuracy(self, images, labels, chunk=2500):
        """Share of correct predictions; images raw (N, 784) 0..255."""
        self.net.eval()
        correct = None
        for lo in range(0, images.shape[0], chunk):
            x = images[lo:lo + chunk] * (1 / (255 * STD)) - MEAN / STD
            hit = (ev.argmax(self.net(x), dim=1) == labels[lo:lo + chunk]).sum()
            correct = hit if correct is None else correct + hit
        self.net.train()
        return correct.item() / images.shape[0]

    def state_dict(self):
        return {"model": self.bare.state_dict(), "optim": self.opt.state_dict(),
                "sched": self.sched.state_dict()}

    def load_state_dict(self, state):
        self.bare.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optim"])
        self.sched.load_state_dict(state["sched"])


# ----------------------------------------------------------- input pipeline

def one_hot(labels):
    return (labels.unsqueeze(1) == ev.arange(CLASSES)).to(ev.float32)


class Loader:
    """Issues the input pipeline of each batch on its own worker thread.

    The table holds each training image's raw pixels next to its one-hot
    label, (N, 784 + 10), so one row gather fetches both.

    With world_size > 1 it yields this rank's share of each global batch of
    batch_size: batch_size / world_size rows (see the module's docstring)."""

    def __init__(self, images, labels, batch_size, rng, prefetch=2, thread=None, seed=0,
                 rank=0, world_size=1):
        if batch_size % world_size:
            raise ValueError(f"Loader: the batch size {batch_size} is not a multiple of the "
                             f"{world_size} ranks")
        self.thread = thread or ev.asyncs.Thread()
        self.global_batch = batch_size
        self.batch_size = batch_size // world_size  # this rank's rows a batch
        self.rank, self.world_size = rank, world_size
        self.rng = rng
        self.gen = ev.Generator(seed=seed)  # each epoch's permutation
        self.n = images.shape[0]
        self.batches = self.n // batch_size  # the last partial batch is dropped
        # Every rank draws the same permutation from gen and takes its share.
        self.sampler = DistributedSampler(self.n, world_size, rank, generator=self.gen,
                                          drop_last=True) if world_size > 1 else None
        with ev.asyncs.thread(self.thread):
            self.table = ev.empty(self.n, PIXELS + CLASSES)
            self.table[:, :PIXELS] = images
            self.table[:, PIXELS:] = one_hot(labels)
            # The ring of slots the training step reads from.
            b = self.batch_size
            self.slots = [(ev.empty(b, PIXELS), ev.empty(b, CLASSES), ev.empty(b, dtype=ev.int64))
                          for _ in range(prefetch + 1)]
        self.prefetch = prefetch
        self.use_index_select = hasattr(ev, "index_select") and \
            not os.environ.get("EAGERVM_EXAMPLE_ROW_GATHER")

    def get_state(self):
        """The random state the next epochs draw from (for a checkpoint)."""
        bits = self.rng.bit_generator.state
        return {"rng": {"state": str(bits["state"]["state"]), "inc": str(bits["state"]["inc"]),
                        "has_uint32": bits["has_uint32"], "uinteger": bits["uinteger"]},
                "gen": list(self.gen.get_state())}

    def set_state(self, state):
        r = state["rng"]
        self.rng.bit_generator.state = {
            "bit_generator": "PCG64", "has_uint32": r["has_uint32"], "uinteger": r["uinteger"],
            "state": {"state": int(r["state"]), "inc": int(r["inc"])}}
        self.gen.set_state(tuple(state["gen"]))

    def epoch(self):
        """Yields (x, y, target) for each batch of one shuffled epoch,
        issuing the pipeline `prefetch` batches ahead of what it yields."""
        flips = self.rng.random(self.batches * self.global_batch) < 0.5
        if self.sampler:
            flips = flips[self.rank::self.world_size]  # the coins of this rank's positions
        with ev.asyncs.thread(self.thread):
            # One-off per epoch: the permutation (computed on the loader's
            # worker, no sync) and the coin flips, as tensors.
            order_t = self.sampler.indices() if self.sampler else \
                ev.randperm(self.n, generator=self.gen)
            flips_t = ev.from_numpy(flips.astype(np.float32)).reshape(-1, 1)
        # Only the row-by-row fallback needs the order on the host (a sync).
        order = None if self.use_index_select else order_t.tolist()
        pending = []
        for k in range(self.batches + self.prefetch):
            if k < self.batches:
                pending.append(self._issue(k, order, order_t, flips_t))
            if k >= self.prefetch:
                yield pending.pop(0)

    def _issue(self, k, order, order_t, flips_t):
        b = self.batch_size
        lo, hi = k * b, (k + 1) * b
        slot_x, slot_y, slot_t = self.slots[k % len(self.slots)]
        with ev.asyncs.thread(self.thread):
            # Gather the batch's rows of the shuffled order.
            if self.use_index_select:
                rows = ev.index_select(self.table, 0, order_t[lo:hi])
            else:  # until index_select lands in the Python module: one copy per row
                rows = ev.empty(b, PIXELS + CLASSES)
                for j, i in enumerate(order[lo:hi]):
                    rows[j] = self.table[i]
            # Normalise to zero mean, unit variance.
            x = rows[:, :PIXELS] * (1 / (255 * STD)) - MEAN / STD
            # Flip the images whose coin came up: x + coin * (flipped - x).
            # The mirror image is made column by column (copies, no BLAS: a
            # matmul here would share the cores' BLAS threads with training and
            # make its results depend on timing).
            img = x.reshape(b, SIDE, SIDE)
            flipped = ev.empty(b, SIDE, SIDE)
            for c in range(SIDE):
                flipped[:, :, c] = img[:, :, SIDE - 1 - c]
            x = x + flips_t[lo:hi] * (flipped.reshape(b, PIXELS) - x)
            # Hand over: waits (in the runtime) until the step that read this
            # slot last has finished.
            slot_x[...] = x
            slot_y[...] = rows[:, PIXELS:]
            slot_t[...] = ev.argmax(rows[:, PIXELS:], dim=1)  # class indices
        return slot_x, slot_y, slot_t


# ---------------------------------------------------------------- progress

class Progress:
    """A live bar on a terminal, plain lines otherwise."""

    def __init__(self, epochs, batches, batch_size, stream=sys.stdout, every=None):
        self.epochs, self.batches, self.batch_size = epochs, batches, batch_size
        self.stream = stream
        self.tty = stream.isatty()
        self.every = every or (max(1, batches // 50) if self.tty else max(1, batches // 4))

    def due(self, batch):
        return (batch + 1) % self.every == 0 or batch + 1 == self.batches

    def show(self, epoch, batch, loss, samples_per_s):
        done = (batch + 1) / self.batches
        text = (f"epoch {epoch + 1}/{self.epochs} batch {batch + 1}/{self.batches} "
                f"loss {loss:.4f} {samples_per_s:,.0f} samples/s")
        if self.tty:
            bar = "#" * int(30 * done) + "." * (30 - int(30 * done))
            self.stream.write(f"\r[{bar}] {text}\x1b[K")
            if batch + 1 == self.batches:
                self.stream.write("\n")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


# ---------------------------------------------------------------- training

def train(train_images, train_labels, epochs=5, batch_size=128, lr=0.05, momentum=0.9,
          seed=0, prefetch=2, profile_epoch=None, progress=True, out=sys.stdout, save=None,
          resume=None, stop_after=None, distributed=False, bucket_cap_mb=25):
    """Trains an MLP; returns (model, history, prof). history: one dict per
    epoch trained here (loss: mean training loss, seconds, samples_per_s).
    prof: the eagervm profile of epoch `profile_epoch` (0-based), or None.
    save: a checkpoint path written after each epoch; resume: one to start
    from (its epochs count towards `epochs`); stop_after: leave after that
    many epochs of this call (as an interrupted run would). distributed:
    this process is one rank of eagervm.distributed (initialised), training
    its share of each batch of batch_size; only rank 0 shows progress and
    saves; mean losses are over all ranks."""
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    rng = np.random.default_rng(seed)
    loader = Loader(train_images, train_labels, batch_size, rng, prefetch=prefetch, seed=seed,
                    rank=rank, world_size=world)
    steps = epochs * loader.batches
    model = MLP(rng, lr=lr, momentum=momentum, steps=steps, distributed=distributed,
                bucket_cap_mb=bucket_cap_mb)
    save = save if rank == 0 else None
    progress = progress and rank == 0
    first = 0
    if resume:
        ckpt = ev.load(resume)
        model.load_state_dict(ckpt)
        loader.set_state(ckpt["loader"])
        first = ckpt["epochs_done"]
        if ckpt["batches_per_epoch"] != loader.batches:
            sys.exit(f"fashion_mnist: {resume} was trained with {ckpt['batches_per_epoch']} "
                     f"batches an epoch, this run has {loader.batches}")
    bar = Progress(epochs, loader.batches, batch_size, out) if progress else None
    history, prof = [], None
    ev.synchronize()  # time the training, not the loading of the data set
    last = epochs if stop_after is None else min(epochs, first + stop_after)
    for epoch in range(first, last):
        if epoch == profile_epoch:
            prof = ev.profiler.profile(labels={loader.thread: "loader", 0: "training"})
            prof.start()
        t0 = time.perf_counter()
        total = ev.zeros(())
        seen_loss, seen_batches = 0.0, 0
        for k, (x, y, target) in enumerate(loader.epoch()):
            loss = model.step(x, target)
            total += loss
            if bar and bar.due(k):
                # Reading the loss is a sync point: it waits for this step only,
                # the loader goes on with the next batches meanwhile.
                s = total.item()
                rate = (k + 1) * batch_size / (time.perf_counter() - t0)
                bar.show(epoch, k, (s - seen_loss) / (k + 1 - seen_batches), rate)
                seen_loss, seen_batches = s, k + 1
        if distributed:
            dist.all_reduce(total, op=dist.ReduceOp.AVG)  # the mean over the ranks' shards
        mean_loss = total.item() / loader.batches
        secs = time.perf_counter() - t0
        if prof is not None and epoch == profile_epoch:
            prof.stop()
        history.append({"loss": mean_loss, "seconds": secs,
                        "samples_per_s": loader.batches * batch_size / secs})
        if save:
            ev.save(dict(model.state_dict(), loader=loader.get_state(), epochs_done=epoch + 1,
                         batches_per_epoch=loader.batches), save)
    return model, history, prof


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prefetch", type=int, default=2, help="batches the loader runs ahead")
    ap.add_argument("--limit", type=int, default=0, help="use only the first N training images")
    ap.add_argument("--data", default=None, help=f"folder of the IDX files "
                    f"(default {mnist.FASHION_MNIST_ROOT})")
    ap.add_argument("--out", default="fashion_mnist_profile",
                    help="folder for the trace and the timeline (default %(default)s)")
    ap.add_argument("--profile-epoch", type=int, default=None,
                    help="1-based epoch to profile (default: the last); 0: none")
    ap.add_argument("--save", default=None, metavar="CKPT",
                    help="write a checkpoint (safetensors) there after each epoch")
    ap.add_argument("--resume", default=None, metavar="CKPT",
                    help="continue from a checkpoint that --save wrote")
    ap.add_argument("--distributed", action="store_true",
                    help="one rank of a data-parallel run (start with mpirun -np N)")
    ap.add_argument("--bucket-cap-mb", type=float, default=25,
                    help="--distributed: the gradient bucket size (default %(default)s)")
    args = ap.parse_args(argv)
    rank = 0
    if args.distributed:
        if not dist.is_available():
            sys.exit("fashion_mnist: --distributed needs eagervm.distributed (a build with MPI)")
        dist.init_process_group()
        rank = dist.get_rank()
        if rank:  # rank 0 alone speaks
            sys.stdout = open(os.devnull, "w")
    try:
        return run(args)
    finally:
        if args.distributed:
            dist.destroy_process_group()


def run(args):
    t_start = time.perf_counter()
    try:
        train_x, train_y = mnist.load_fashion_mnist("train", args.data)
        test_x, test_y = mnist.load_fashion_mnist("test", args.data)
    except (OSError, mnist.IDXError) as exc:
        sys.exit(f"fashion_mnist: cannot read the data set: {exc}")
    if args.limit:
        train_x, train_y = train_x[:args.limit], train_y[:args.limit]
    print(f"Fashion-MNIST: {train_x.shape[0]} training and {test_x.shape[0]} test images "
          f"(read in {time.perf_counter() - t_start:.1f} s)")
    if args.distributed:
        world = dist.get_world_size()
        print(f"data-parallel on {world} ranks: {args.batch_size // world} images a rank a "
              f"batch (global batch {args.batch_size})")
    pe = args.epochs if args.profile_epoch is None else args.profile_epoch
    model, history, prof = train(train_x, train_y, args.epochs, args.batch_size, args.lr,
                                 args.momentum, args.seed, args.prefetch,
                                 profile_epoch=pe - 1 if pe else None, save=args.save,
                                 resume=args.resume, distributed=args.distributed,
                                 bucket_cap_mb=args.bucket_cap_mb)
    if args.distributed and dist.get_rank():
        return None  # the weights are the same on every rank: rank 0 alone tests them
    acc = model.accuracy(test_x, test_y)
    print(f"test accuracy: {acc:.4f} after {args.epochs} epochs")
    if history:
        secs = sum(h["seconds"] for h in history)
        samples = sum(h["samples_per_s"] * h["seconds"] for h in history)
        print(f"training throughput: {samples / secs:,.0f} samples/s ({secs:.1f} s for "
              f"{len(history)} epochs of {round(samples / len(history))} samples)")
    if args.save:
        print(f"checkpoint: {os.path.abspath(args.save)}")
    if prof is not None:
        os.makedirs(args.out, exist_ok=True)
        trace = prof.export_chrome_trace(os.path.join(args.out, "trace.json"))
        print(f"profile of epoch {pe}: {len(prof.events)} instructions")
        print(prof.summary(limit=12))
        print(f"chrome trace: {os.path.abspath(trace)}  (open in https://ui.perfetto.dev)")
        try:
            png = prof.plot_timeline(os.path.join(args.out, "timeline.png"),
                                     title=f"Fashion-MNIST, epoch {pe}: loader and training "
                                           f"workers")
            zoom = plot_zoom(prof, os.path.join(args.out, "timeline_zoom.png"))
            print(f"timeline: {os.path.abspath(png)}")
            print(f"timeline, a few batches: {os.path.abspath(zoom)}")
        except ImportError as exc:
            print(f"timeline: not drawn: {exc}")
    print(f"total run time: {time.perf_counter() - t_start:.1f} s")
    return acc


def plot_zoom(prof, path, batches=4):
    """The timeline of a few batches from the middle of the epoch."""
    evs = prof.events
    mid = evs[len(evs) // 2].start_ns
    steps = [e.start_ns for e in evs if e.name == "cross_entropy"]
    i = min(range(len(steps)), key=lambda j: abs(steps[j] - mid)) if steps else 0
    lo = steps[i] if steps else mid
    hi = steps[min(i + batches, len(steps) - 1)] if steps else mid + 10_000_000
    t0 = prof.start_ns
    return prof.plot_timeline(path, window=((lo - t0) / 1e6, (hi - t0) / 1e6),
                              title=f"{batches} batches from the middle of the epoch")


if __name__ == "__main__":
    main()
