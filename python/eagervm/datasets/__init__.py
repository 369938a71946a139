"""Data sets for eagervm's examples, read by our own loaders."""
from . import mnist  # noqa: F401
