"""Makes the in-place build in python/ importable when pytest runs without
scripts/test_python.sh (which sets PYTHONPATH itself)."""
import os
import sys

_PY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")
try:
    import eagervm  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.abspath(_PY))
