"""DistributedSampler: each rank's share of a data set's indices, as
torch.utils.data.DistributedSampler draws them.

    sampler = DistributedSampler(60000, num_replicas=2, rank=r, seed=0)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        order = sampler.indices()      # int64 eagervm tensor, this rank's share
        ...                            # e.g. eagervm.index_select(table, 0, order[lo:hi])

Every rank draws the same permutation of range(n) (eagervm.randperm from a
generator seeded with seed + epoch, or from the generator passed in, which
every rank must seed alike) and takes every num_replicas-th index from rank
on: the shares are disjoint, equally long, and together cover the data set.
Unless drop_last, the permutation is first padded with its own head to a
multiple of num_replicas (a few indices then appear twice); with drop_last
its tail is cut to one instead.

Taking the indices strided has a property the main job relies on: the k-th
batch of b indices on each of R ranks together hold exactly the k-th batch
of R * b indices of the one-process order, so R ranks with per-rank batch b
see the batches a single process with batch R * b would (when n divides
evenly).

indices() issues eagervm ops and returns at once (no host wait), on the
caller's worker thread; iterating the sampler hands out Python ints (a
sync point), as torch's does.
"""
import math

from .. import _C

__all__ = ["DistributedSampler"]


def _length(dataset):
    if isinstance(dataset, bool):
        raise TypeError("DistributedSampler: dataset must be a length, a Tensor or a sized "
                        "object, not bool")
    if isinstance(dataset, int):
        return dataset
    if isinstance(dataset, _C.Tensor):
        if dataset.ndim == 0:
            raise ValueError("DistributedSampler: a 0-d Tensor has no rows to sample")
        return dataset.shape[0]
    try:
        return len(dataset)
    except TypeError:
        raise TypeError(f"DistributedSampler: dataset must be a length, a Tensor or a sized "
                        f"object, not {type(dataset).__name__}") from None


def _world():
    """(world size, rank) of eagervm.distributed, or a clear error."""
    from .. import distributed as dist
    if not dist.is_initialized():
        raise RuntimeError("DistributedSampler: pass num_replicas and rank, or call "
                           "eagervm.distributed.init_process_group() first")
    return dist.get_world_size(), dist.get_rank()


class DistributedSampler:
    """DistributedSampler(dataset, num_replicas=None, rank=None, shuffle=True,
    seed=0, drop_last=False, generator=None)

    dataset: its length, a Tensor (its rows) or any sized object.
    num_replicas, rank: default to eagervm.distributed's world size and rank.
    generator: an eagervm.Generator to draw each epoch's permutation from (in
    turn, ignoring seed and set_epoch); by default a fresh one seeded with
    seed + epoch.
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False, generator=None):
        n = _length(dataset)
        if n < 0:
            raise ValueError(f"DistributedSampler: the data set's length must be >= 0, got {n}")
        if num_replicas is None or rank is None:
            world, me = _world()
            num_replicas = world if num_replicas is None else num_replicas
            rank = me if rank is None else rank
        for name, v in (("num_replicas", num_replicas), ("rank", rank), ("seed", seed)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"DistributedSampler: {name} must be an int, not "
                                f"{type(v).__name__}")
        if num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be >= 1, got {num_replicas}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        if generator is not None and not isinstance(generator, _C.Generator):
            raise TypeError(f"DistributedSampler: generator must be an eagervm.Generator, not "
                            f"{type(generator).__name__}")
        self.n, self.num_replicas, self.rank = n, num_replicas, rank
        self.shuffle, self.seed, self.drop_last = bool(shuffle), seed, bool(drop_last)
        self.generator = generator
        self.epoch = 0
        if drop_last and n % num_replicas:
            self.num_samples = (n - num_replicas) // num_replicas + 1 if n >= num_replicas \
                else 0
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def set_epoch(self, epoch):
        """The epoch the next permutation is drawn for (seed + epoch)."""
        if isinstance(epoch, bool) or not isinstance(epoch, int):
            raise TypeError(f"set_epoch: epoch must be an int, not {type(epoch).__name__}")
        self.epoch = epoch

    def __len__(self):
        return self.num_samples

    def permutation(self):
        """The whole epoch's order (the same on every rank), padded or cut to
        total_size: an int64 tensor."""
        if self.shuffle:
            gen = self.generator or _C.Generator(seed=self.seed + self.epoch)
            order = _C.randperm(self.n, generator=gen)
        else:
            order = _C.arange(self.n)
        if self.total_size <= self.n:
            return order[:self.total_size]
        # Pad with the head, repeated when the padding is longer than n.
        parts, short = [order], self.total_size - self.n
        while short > 0:
            parts.append(order[:min(short, self.n)])
            short -= self.n
        return _C.cat(parts)

    def indices(self):
        """This rank's indices for the epoch: every num_replicas-th of the
        permutation from rank on, num_samples of them, as a contiguous int64
        tensor. Issued, not waited for."""
        order = self.permutation()
        if self.num_replicas == 1:
            return order
        return order[self.rank:self.total_size:self.num_replicas].contiguous()

    def __iter__(self):
        return iter(self.indices().tolist())
