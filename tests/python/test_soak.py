"""Soak, short (issue 6, part 5): bench/soak.py with 300,000 tiny ops in a
fresh process; resident memory must grow less than 5% after the warm-up.
The 10,000,000-op run is `/usr/bin/python3 bench/soak.py` (see its docstring
and docs/reliability.md)."""
import os
import subprocess
import sys

import pytest

import eagervm as ev

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOAK = os.path.join(ROOT, "bench", "soak.py")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc/self/statm")
def test_short_soak_keeps_rss_flat():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(ev.__file__)) + os.pathsep + \
        env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, SOAK, "--ops", "300000", "--warmup", "100000"],
                       env=env, capture_output=True, text=True, timeout=120)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rss growth after warm-up" in r.stdout
