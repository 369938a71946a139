"""eagervm.distributed over MPI: the worker scripts in distributed_workers/
run under mpirun (2 and 4 ranks) and write what they saw per rank; these
tests read it. Every launch runs under a timeout: nothing here may hang.
Skips cleanly when mpirun or the MPI build is absent."""
import json
import os
import shutil
import subprocess
import sys

import pytest

import eagervm.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = os.path.join(HERE, "distributed_workers")
PYTHON_DIR = os.path.abspath(os.path.join(HERE, "..", "..", "python"))
MPIRUN = shutil.which("mpirun")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

def _env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = PYTHON_DIR + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def _mpirun(tmp_path, n, script, *args, env=None, timeout=90, keep_going=False):
    """Runs script on n ranks; returns {rank: result} from the files they
    wrote (a rank that wrote none is missing) and the completed process."""
    cmd = [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", str(n)]
    if keep_going:
        # Open MPI 4: a rank that dies must not make mpirun kill the others
        # first; the survivors have to notice by themselves.
        cmd += ["--mca", "orte_abort_on_non_zero_status", "0"]
    env = env or _env()
    for name in ("PYTHONPATH", "EAGERVM_DISTRIBUTED_DEBUG", "EAGERVM_COLLECTIVE_TIMEOUT",
                 "EAGERVM_SYNC"):
        if name in env:
            cmd += ["-x", name]
    cmd += [PYTHON, os.path.join(WORKERS, script), str(tmp_path), *args]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    results = {}
    for r in range(n):
        path = tmp_path / f"rank{r}.json"
        if path.exists():
            results[r] = json.loads(path.read_text())
    return results, proc


def _skip_without_mpi():
    if MPIRUN is None:
        pytest.skip("mpirun is not installed (openmpi-bin)")
    if not dist.is_available():
        pytest.skip("eagervm was built without MPI")


@pytest.mark.parametrize("n,sync", [(2, "0"), (4, "0"), (2, "1")])
def test_collectives(tmp_path, n, sync):
    """Every collective, op and dtype against NumPy; errors; Work; threads;
    the profiler; a fork child. Also under EAGERVM_SYNC=1."""
    _skip_without_mpi()
    results, proc = _mpirun(tmp_path, n, "collectives.py", env=_env(EAGERVM_SYNC=sync))
    assert sorted(results) == list(range(n)), proc.stdout + proc.stderr
    for r, res in results.items():
        assert res["failures"] == [], f"rank {r}: {res['failures']}"
        assert res["checks"] > 400
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_desync_raises_on_every_rank(tmp_path):
    _skip_without_mpi()
    results, proc = _mpirun(tmp_path, 2, "faults.py", "desync",
                            env=_env(EAGERVM_DISTRIBUTED_DEBUG="1"))
    assert sorted(results) == [0, 1], proc.stdout + proc.stderr
    f = results[0]["file"]
    ar, bc = results[0]["lines"]["all_reduce"], results[1]["lines"]["broadcast"]
    for r in (0, 1):
        err = results[r]["error"]
        assert err is not None, f"rank {r} did not raise"
        assert "collective 1 differs across ranks" in err
        assert f"rank 0 all_reduce float32[4] op=sum at {f}:{ar}" in err, err
        assert f"rank 1 broadcast float32[4] src=0 at {f}:{bc}" in err, err
        # The mismatched collective ran nowhere; the next one works.
        assert results[r]["after"] == [2.0, 2.0, 2.0]
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("how", ["exit", "kill"])
def test_lost_rank_raises_within_timeout(tmp_path, how):
    _skip_without_mpi()
    results, proc = _mpirun(tmp_path, 2, "faults.py", how, keep_going=True,
                            env=_env(EAGERVM_COLLECTIVE_TIMEOUT="2"), timeout=60)
    assert 0 in results, proc.stdout + proc.stderr
    res = results[0]
    assert "crash" not in res, res.get("crash")
    err = res["error"]
    assert err is not None, "rank 0 did not raise"
    assert 1.5 < res["elapsed"] < 15, res["elapsed"]
    assert f"collective 2 (all_reduce float32[4] op=sum at {res['file']}:{res['line']})" in err
    assert "timed out after" in err and "EAGERVM_COLLECTIVE_TIMEOUT=2" in err
    assert "ranks that have not joined it: rank 1 (last started collective 1: all_reduce" in err
    # Printed to stderr as well, and the group refuses later collectives.
    assert "ranks that have not joined it" in proc.stderr
    assert "the process group is unusable" in res["later"]


def test_poisoned_input_fails_the_peers_at_once(tmp_path):
    """A rank whose collective is skipped (its input poisoned by a failed
    kernel) tells its peers, which raise at once instead of at the timeout."""
    _skip_without_mpi()
    results, proc = _mpirun(tmp_path, 2, "faults.py", "poison", keep_going=True,
                            env=_env(EAGERVM_COLLECTIVE_TIMEOUT="60"), timeout=60)
    assert sorted(results) == [0, 1], proc.stdout + proc.stderr
    r0, r1 = results[0], results[1]
    assert r1["error"].startswith("IndexError: take failed"), r1["error"]
    assert r0["elapsed"] < 10, r0["elapsed"]
    where = f"all_reduce float32[1] op=sum at {r0['file']}:{r0['line']}"
    assert f"rank 0: collective 2 ({where}) cannot complete: rank 1 skipped collective 2 " \
        f"({where}) because its input was poisoned" in r0["error"], r0["error"]


def test_single_process_without_mpirun(tmp_path):
    """A singleton MPI world (no mpirun): world size 1, collectives are
    identities."""
    _skip_without_mpi()
    code = ("import eagervm as ev, eagervm.distributed as d\n"
            "d.init_process_group('mpi')\n"
            "t = ev.arange(5, dtype=ev.float32)\n"
            "d.all_reduce(t, d.ReduceOp.AVG)\n"
            "o = ev.zeros(5)\n"
            "d.all_gather_into_tensor(o, t)\n"
            "print(d.get_rank(), d.get_world_size(), o.numpy().tolist())\n"
            "d.destroy_process_group()\n")
    env = {k: v for k, v in _env().items() if not k.startswith(("OMPI_", "PMIX_"))}
    proc = subprocess.run([PYTHON, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.split("\n")[0] == "0 1 [0.0, 1.0, 2.0, 3.0, 4.0]"


def test_unavailable_build_raises_clearly(monkeypatch):
    """The path of a build without MPI, taken without C: is_available() is
    False and init_process_group() says MPI was not found at build time."""
    monkeypatch.setattr(dist, "_available", False)
    assert dist.is_available() is False
    assert dist.is_initialized() is False
    with pytest.raises(RuntimeError, match="MPI was not found at build time"):
        dist.init_process_group("mpi")


def test_arguments_before_init():
    """Without a group every collective raises at the call, naming the fix;
    a backend other than MPI is refused."""
    if not dist.is_available():
        pytest.skip("eagervm was built without MPI")
    import eagervm as ev
    with pytest.raises(RuntimeError, match="init_process_group"):
        dist.all_reduce(ev.ones(2))
    with pytest.raises(RuntimeError, match="not initialised"):
        dist.get_rank()
    with pytest.raises(ValueError, match="backend 'nccl'"):
        dist.init_process_group("nccl")
    assert [op.name for op in dist.ReduceOp] == ["SUM", "AVG", "PRODUCT", "MIN", "MAX"]


def test_bad_settings_fail_before_mpi(monkeypatch):
    """Settings are checked before MPI starts (so this process never
    initialises MPI here)."""
    if not dist.is_available():
        pytest.skip("eagervm was built without MPI")
    monkeypatch.setenv("EAGERVM_COLLECTIVE_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="EAGERVM_COLLECTIVE_TIMEOUT=soon"):
        dist.init_process_group()
    monkeypatch.delenv("EAGERVM_COLLECTIVE_TIMEOUT")
    monkeypatch.setenv("EAGERVM_DISTRIBUTED_DEBUG", "yes")
    with pytest.raises(ValueError, match="EAGERVM_DISTRIBUTED_DEBUG=yes"):
        dist.init_process_group()
    with pytest.raises(ValueError, match="timeout must be positive"):
        dist.init_process_group(timeout=-1)
    assert not dist.is_initialized()
