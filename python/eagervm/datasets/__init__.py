"""Data sets for eagervm's examples, read by our own loaders, and
DistributedSampler, each rank's share of a data set's indices."""
from . import mnist  # noqa: F401
from .sampler import DistributedSampler  # noqa: F401
