"""Run by tests/python/test_distributed.py under mpirun: the failures that
must raise instead of hanging. argv: out_dir, scenario.
  desync  (EAGERVM_DISTRIBUTED_DEBUG=1): rank 0 issues an all_reduce where
          rank 1 issues a broadcast; both must raise naming both lines, and
          the group must stay usable.
  exit / kill  (short EAGERVM_COLLECTIVE_TIMEOUT): rank 1 dies (os._exit or
          SIGKILL) after one collective; rank 0's next one must raise within
          the timeout, naming rank 1 and its last collective.
  poison  rank 1's input to a collective is poisoned (a kernel failed), so
          it skips the collective; rank 0 must raise at once, naming it.
Each surviving rank writes rank<r>.json: what it saw."""
import json
import os
import signal
import sys
import time
import traceback

import eagervm as ev
import eagervm.distributed as dist


def desync(rank, world):
    t = ev.ones(4)
    lines = {"all_reduce": 0, "broadcast": 0}
    if rank == 0:
        lines["all_reduce"] = sys._getframe().f_lineno + 1
        dist.all_reduce(t)
    else:
        lines["broadcast"] = sys._getframe().f_lineno + 1
        dist.broadcast(t, 0)
    try:
        t.numpy()
        error = None
    except RuntimeError as e:
        error = str(e)
    # Every rank skipped the mismatched data collective: the next one works.
    u = ev.ones(3)
    dist.all_reduce(u)
    return {"error": error, "lines": lines, "after": u.numpy().tolist()}


def lost_peer(rank, world, how):
    t = ev.ones(4)
    dist.all_reduce(t)
    t.numpy()
    if rank == 1:
        sys.stdout.flush()
        if how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(3)
    line = sys._getframe().f_lineno + 2
    start = time.monotonic()
    dist.all_reduce(t)
    try:
        t.numpy()
        error = None
    except RuntimeError as e:
        error = str(e)
    elapsed = time.monotonic() - start
    # The group is unusable now: later collectives fail at once.
    u = ev.ones(2)
    dist.all_reduce(u)
    try:
        u.numpy()
        later = None
    except RuntimeError as e:
        later = str(e)
    return {"error": error, "line": line, "elapsed": elapsed, "later": later}


def poisoned(rank, world):
    """Rank 1's input comes from a kernel that fails: its all_reduce is
    skipped there, and rank 0 must hear of it at once, not at the timeout."""
    t = ev.ones(4)
    dist.all_reduce(t)
    t.numpy()
    x = ev.ones(1)
    if rank == 1:
        x = ev.take(ev.arange(4.0, dtype=ev.float32), ev.tensor([7]))
    line = sys._getframe().f_lineno + 2
    start = time.monotonic()
    dist.all_reduce(x)
    try:
        x.numpy()
        error = None
    except (RuntimeError, IndexError) as e:
        error = f"{type(e).__name__}: {e}"
    return {"error": error, "line": line, "elapsed": time.monotonic() - start}


if __name__ == "__main__":
    out_dir, scenario = sys.argv[1], sys.argv[2]
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    try:
        dist.init_process_group()
        world = dist.get_world_size()
        if scenario == "desync":
            result = desync(rank, world)
        elif scenario == "poison":
            result = poisoned(rank, world)
        else:
            result = lost_peer(rank, world, scenario)
    except BaseException:  # noqa: BLE001
        result = {"crash": traceback.format_exc()}
    result["file"] = __file__
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    sys.stdout.flush()
    sys.stderr.flush()
    if scenario == "poison":
        # As a program that stops at its error: a non-zero status, which
        # mpirun (with orte_abort_on_non_zero_status 0) lets the peer outlive.
        os._exit(3)
    if scenario != "desync":
        os._exit(0)  # MPI cannot finalise without the lost peer
