"""What was built, and that a build is what it says: eagervm.config() and
show_config(), the import-time warning of a build without BLAS, and builds
that never reuse objects of another configuration (CMake directly, and pip
through scikit-build-core, both from the one CMakeLists.txt)."""
import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

import eagervm as ev

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PKG = os.path.join(ROOT, "python", "eagervm")
UNDER_ASAN = "libasan" in os.environ.get("LD_PRELOAD", "")
NO_BLAS_WARNING = "eagervm was built without BLAS"

# The build tests compile the library again: once per suite run is enough,
# and a module built here has no sanitizer to load under LD_PRELOAD.
build_test = pytest.mark.skipif(UNDER_ASAN, reason="build tests run in the normal pass")


def _version_h():
    with open(os.path.join(ROOT, "include", "eagervm", "version.h")) as f:
        return re.search(r'#define EAGERVM_VERSION "([0-9.]+)"', f.read()).group(1)


def _python(code, env_extra=None, path=None, drop=()):
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(env_extra or {})
    if path is not None:
        env["PYTHONPATH"] = path
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300, cwd="/")


# ------------------------------------------------------------ config()

def test_config_describes_this_build():
    c = ev.config()
    assert list(c) == ["eagervm", "build", "blas", "simd", "threads", "environment"]
    assert c["eagervm"]["version"] == ev.__version__ == _version_h()
    assert os.path.samefile(c["eagervm"]["module"], ev._C.__file__)
    b = c["build"]
    assert b["type"] in ("Release", "RelWithDebInfo", "Debug", "MinSizeRel")
    assert b["compiler"].split()[0] in ("GNU", "Clang")
    assert "-std=c11" in b["c_flags"]
    if UNDER_ASAN:
        assert {"address", "undefined"} <= set(b["sanitizers"])
        assert "-fsanitize=address" in b["c_flags"]
    else:
        assert b["sanitizers"] == []
        assert "-fsanitize" not in b["c_flags"]
    blas = c["blas"]
    if blas["enabled"]:
        assert blas["off_on_purpose"] is False
        assert os.path.exists(blas["library"])
        assert blas["runtime"].startswith("OpenBLAS ")
        assert blas["threads"] >= 1 and c["threads"]["blas_threads"] == blas["threads"]
    else:
        assert blas["library"] is None and blas["runtime"] is None and blas["threads"] is None
    assert c["simd"]["level"] in ("x86-64-v4", "x86-64-v3", "baseline",
                                  "baseline (no SIMD clones in this build)")
    if UNDER_ASAN:  # ifunc resolvers cannot run before the sanitizers' runtimes
        assert c["simd"]["level"] == "baseline (no SIMD clones in this build)"
    assert c["threads"]["worker_thread_limit"] == ev._C._stats()["thread_limit"]
    assert c["threads"]["intraop_threads"] >= 1
    # import eagervm sets it unless the user did (see __init__.py).
    assert "OPENBLAS_THREAD_TIMEOUT" in c["environment"]


def test_config_reads_the_environment_in_effect():
    r = _python("import json, eagervm as ev; c = ev.config(); "
                "print(json.dumps([c['environment'], c['threads']])); ev.show_config()",
                {"EAGERVM_WORKER_THREAD_LIMIT": "5", "EAGERVM_INTRAOP_THREADS": "1",
                 "OMP_NUM_THREADS": "3", "UNRELATED_VARIABLE": "x"},
                path=os.path.dirname(os.path.dirname(ev.__file__)))
    assert r.returncode == 0, r.stderr
    import json
    first, _, shown = r.stdout.partition("\n")
    env, threads = json.loads(first)
    assert env["EAGERVM_WORKER_THREAD_LIMIT"] == "5"
    assert env["EAGERVM_INTRAOP_THREADS"] == "1"
    assert env["OMP_NUM_THREADS"] == "3"
    assert "UNRELATED_VARIABLE" not in env
    assert threads["worker_thread_limit"] == 5
    assert threads["intraop_threads"] == 1
    assert "  EAGERVM_WORKER_THREAD_LIMIT: 5" in shown
    assert "  worker_thread_limit: 5" in shown


def test_show_config_prints_every_section(capsys):
    assert ev.show_config() is None
    out = capsys.readouterr().out
    for section in ("eagervm:", "build:", "blas:", "simd:", "threads:", "environment:"):
        assert f"\n{section}\n" in "\n" + out
    assert f"  version: {ev.__version__}\n" in out
    assert f"  level: {ev.config()['simd']['level']}\n" in out
    assert f"  enabled: {ev.config()['blas']['enabled']}\n" in out


# ------------------------------------------------- builds, through CMake

def _blas_header_dirs():
    """The folders where cmake/blas.cmake can find OpenBLAS's headers."""
    dirs = set()
    for pat in ("/usr/include/cblas.h", "/usr/include/*/cblas.h", "/usr/include/*/*/cblas.h",
                "/usr/include/*/openblas_config.h", "/usr/include/*/*/openblas_config.h"):
        dirs.update(os.path.dirname(p) for p in glob.glob(pat))
    return sorted(dirs)


def _package_with(module, where):
    """A copy of the eagervm package around a freshly built module."""
    pkg = os.path.join(where, "eagervm")
    shutil.copytree(PKG, pkg, ignore=shutil.ignore_patterns("_C", "*.so", "__pycache__"))
    shutil.copy(module, pkg)
    return where


def _cmake_build_module(build, env=None, *options):
    env = dict(os.environ, **(env or {}))
    conf = subprocess.run(["cmake", "-S", ROOT, "-B", build, f"-DPython3_EXECUTABLE={sys.executable}",
                           "-DEV_BUILD_TESTS=OFF", "-DEV_BUILD_BENCH=OFF", *options],
                          env=env, capture_output=True, text=True, timeout=300)
    assert conf.returncode == 0, conf.stdout + conf.stderr
    make = subprocess.run(["cmake", "--build", build, "--target", "eagervm_python", "-j",
                           str(os.cpu_count() or 1)], env=env, capture_output=True, text=True,
                          timeout=900)
    assert make.returncode == 0, make.stdout + make.stderr
    (module,) = glob.glob(os.path.join(build, "python", "eagervm", "_C.*.so"))
    return conf.stdout + conf.stderr, module


@build_test
@pytest.mark.skipif(not shutil.which("cmake"), reason="needs cmake")
def test_build_that_finds_no_blas_warns_at_build_and_once_at_import(tmp_path):
    dirs = _blas_header_dirs()
    if not dirs:
        pytest.skip("OpenBLAS is not installed: nothing to hide")
    # CMAKE_IGNORE_PATH makes CMake search as if OpenBLAS's headers were absent.
    log, module = _cmake_build_module(str(tmp_path / "b"), {"EAGERVM_NO_BLAS": ""},
                                      "-DCMAKE_IGNORE_PATH=" + ";".join(dirs))
    assert "CMake Warning" in log and "OpenBLAS not found" in log, log
    path = _package_with(module, str(tmp_path / "pkg"))
    code = ("import eagervm, importlib, eagervm as again; c = eagervm.config()['blas']; "
            "print(c['enabled'], c['off_on_purpose']); print(eagervm.matmul(eagervm.ones(2, 3), "
            "eagervm.ones(3, 2)).tolist())")
    r = _python(code, path=path, drop=("EAGERVM_NO_BLAS",))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["False False", "[[3.0, 3.0], [3.0, 3.0]]"]
    assert r.stderr.count(NO_BLAS_WARNING) == 1, r.stderr
    assert "RuntimeWarning" in r.stderr
    # Set on purpose at run time: no warning.
    r = _python(code, {"EAGERVM_NO_BLAS": "1"}, path=path)
    assert r.returncode == 0 and NO_BLAS_WARNING not in r.stderr, r.stderr


def _all_objects(build):
    return {p: os.stat(p).st_mtime_ns
            for p in glob.glob(os.path.join(build, "**", "*.o"), recursive=True)}


@build_test
@pytest.mark.skipif(not shutil.which("cmake"), reason="needs cmake")
def test_cmake_build_folder_recompiles_everything_a_new_configuration_touches(tmp_path):
    """One folder, three configurations (no BLAS on purpose, BLAS if found,
    Debug): each build recompiles every object and reports what it is."""
    build, path = str(tmp_path / "b"), str(tmp_path / "pkg")
    show = ("import eagervm; c = eagervm.config(); "
            "print(c['blas']['enabled'], c['blas']['off_on_purpose'], c['build']['type'])")
    have_blas = bool(_blas_header_dirs())
    before = {}
    for env, options, expect in (
            ({"EAGERVM_NO_BLAS": "1"}, ["-DCMAKE_BUILD_TYPE=RelWithDebInfo"],
             "False True RelWithDebInfo"),
            ({"EAGERVM_NO_BLAS": ""}, [], f"{have_blas} False RelWithDebInfo"),
            ({"EAGERVM_NO_BLAS": ""}, ["-DCMAKE_BUILD_TYPE=Debug"], f"{have_blas} False Debug")):
        log, module = _cmake_build_module(build, env, *options)
        after = _all_objects(build)
        assert len(after) > 20
        stale = [p for p in before if after.get(p, 0) <= before[p]]
        assert not stale, f"objects of the previous configuration reused: {stale[:5]}"
        before = after
        shutil.rmtree(path, ignore_errors=True)
        r = _python(show, path=_package_with(module, path), drop=("EAGERVM_NO_BLAS",))
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == expect
        assert NO_BLAS_WARNING not in r.stderr


# --------------------------------------------------- builds, through pip

def _source_tree(dest):
    """The project's files (tracked, and new ones git does not ignore), as a
    fresh clone would have them, without any build folder."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard"], cwd=ROOT, capture_output=True,
                             check=True, timeout=60).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("needs a git checkout to copy the sources from")
    for rel in out.decode().split("\0"):
        if rel and os.path.isfile(os.path.join(ROOT, rel)):
            os.makedirs(os.path.join(dest, os.path.dirname(rel)), exist_ok=True)
            shutil.copy2(os.path.join(ROOT, rel), os.path.join(dest, rel))
    return dest


def _pip_build_and_install(tree, wheels, target, env_extra):
    env = dict(os.environ, **env_extra)
    env.pop("PYTHONPATH", None)
    shutil.rmtree(wheels, ignore_errors=True)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-build-isolation",
                        "--no-deps", "--no-index", "-w", wheels, tree], env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    (wheel,) = glob.glob(os.path.join(wheels, "eagervm-*.whl"))
    shutil.rmtree(target, ignore_errors=True)
    i = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                        "--target", target, wheel], env=env, capture_output=True, text=True,
                       timeout=300)
    assert i.returncode == 0, i.stderr
    return r.stdout + r.stderr


def _objects(tree):
    return {p: os.stat(p).st_mtime_ns
            for p in glob.glob(os.path.join(tree, "build-wheel", "**", "*.o"), recursive=True)}


@build_test
@pytest.mark.skipif(importlib.util.find_spec("scikit_build_core") is None or
                    importlib.util.find_spec("pip") is None,
                    reason="needs pip and scikit-build-core (scripts/setup.sh installs them)")
def test_pip_build_without_blas_then_with_it_in_the_same_tree(tmp_path):
    if not _blas_header_dirs():
        pytest.skip("OpenBLAS is not installed")
    tree = _source_tree(str(tmp_path / "src"))
    wheels, target = str(tmp_path / "wheels"), str(tmp_path / "site")
    show = ("import eagervm; c = eagervm.config(); "
            "print(c['blas']['enabled'], c['blas']['off_on_purpose'], c['build']['type'])")

    log = _pip_build_and_install(tree, wheels, target, {"EAGERVM_NO_BLAS": "1"})
    assert "built without BLAS on purpose" in log and "OpenBLAS not found" not in log, log
    first = _objects(tree)
    assert len(first) > 20, "expected the library's objects in the kept build folder"
    r = _python(show, path=target, drop=("EAGERVM_NO_BLAS",))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "True", "Release"]
    assert NO_BLAS_WARNING not in r.stderr  # off on purpose at build time: no warning

    log = _pip_build_and_install(tree, wheels, target, {"EAGERVM_NO_BLAS": ""})
    r = _python(show, path=target, drop=("EAGERVM_NO_BLAS",))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "False", "Release"]
    # The same folder was used, and no object of the first build survived
    # (every target compiles with the build's BLAS definition).
    second = _objects(tree)
    assert set(second) >= set(first)
    stale = [p for p in first if second[p] <= first[p]]
    assert not stale, f"objects reused from the build without BLAS: {stale[:5]}"
