"""The Python package `genesis`, built by CMake and installed by pip.

    pip install --no-build-isolation .            # into the active environment
    pip wheel --no-build-isolation --no-deps .    # a wheel to install elsewhere

Needs only what Debian packages: cmake, a C++ compiler, python3-dev,
pybind11-dev, python3-setuptools and python3-wheel (nothing is downloaded;
--no-build-isolation keeps pip from fetching the build tools).

The extension genesis._C is built by the project's CMake build (target
genesis_python) and put into the package with `cmake --install --component
python` (with any other compiled file that component installs), so it
carries the install RPATH rather than the build tree's; the .py files are
copied from python/genesis/. Every installed file is a copy:
the installed package does not refer back to this tree.

Environment:
    GENESIS_BUILD_DIR   the CMake build directory (default build-python/). An
                        existing one is used as it is configured: pointing it
                        at an existing build (scripts/check_install.sh uses
                        the Release build/) costs no second compile.
    GENESIS_CMAKE_ARGS  extra arguments for a new build directory's configure,
                        e.g. "-DGENESIS_ENABLE_CUDA=OFF".
"""

import glob
import importlib.machinery
import os
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def project_version():
    """The version from project(genesis VERSION x.y.z): the one place it is defined."""
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"project\(\s*genesis\s+VERSION\s+([0-9]+\.[0-9]+\.[0-9]+)", f.read())
    if not m:
        raise RuntimeError("CMakeLists.txt has no project(genesis VERSION x.y.z)")
    return m.group(1)


def build_dir():
    return os.path.abspath(os.environ.get("GENESIS_BUILD_DIR") or os.path.join(ROOT, "build-python"))


def run(cmd):
    print("setup.py: " + " ".join(shlex.quote(str(c)) for c in cmd), flush=True)
    subprocess.run(cmd, check=True)


class CMakeExtension(Extension):
    """An extension whose sources CMake knows (python/CMakeLists.txt)."""

    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        cmake = shutil.which("cmake")
        if cmake is None:
            raise RuntimeError("cmake not found on PATH (install the Debian package cmake)")
        bdir = build_dir()
        cache = os.path.join(bdir, "CMakeCache.txt")
        if not os.path.exists(cache):
            # The interpreter's real path: a venv's python may be gone by the
            # time the build directory is used again.
            args = [cmake, "-S", ROOT, "-B", bdir, "-DCMAKE_BUILD_TYPE=Release",
                    "-DGENESIS_BUILD_TESTS=OFF", "-DGENESIS_BUILD_BENCH=OFF", "-DGENESIS_BUILD_EXAMPLES=OFF",
                    "-DPython3_EXECUTABLE=" + os.path.realpath(sys.executable)]
            if shutil.which("ninja"):
                args += ["-G", "Ninja"]
            run(args + shlex.split(os.environ.get("GENESIS_CMAKE_ARGS", "")))
        else:
            with open(cache, encoding="utf-8") as f:
                text = f.read()
            for off in ("GENESIS_BUILD_PYTHON:BOOL=OFF", "GENESIS_INSTALL:BOOL=OFF"):
                if off in text:
                    raise RuntimeError(f"{bdir} is configured with {off.replace(':BOOL', '')}: "
                                       "configure it with that option ON, or set GENESIS_BUILD_DIR to another directory")
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 2)
        run([cmake, "--build", bdir, "--target", "genesis_python", "-j", jobs])

        stage = os.path.join(os.path.abspath(self.build_temp), "cmake-install")
        shutil.rmtree(stage, ignore_errors=True)
        run([cmake, "--install", bdir, "--component", "python", "--prefix", stage])
        built = glob.glob(os.path.join(stage, "**", "genesis", "_C*.so"), recursive=True)
        if len(built) != 1:
            raise RuntimeError(f"cmake --install put {len(built)} genesis/_C*.so files under {stage} (expected 1)")
        suffix = os.path.basename(built[0])[len("_C"):]
        if suffix not in importlib.machinery.EXTENSION_SUFFIXES:
            raise RuntimeError(f"{built[0]} was built for another Python (suffix {suffix}; this interpreter "
                               f"loads {importlib.machinery.EXTENSION_SUFFIXES}): use a build directory "
                               f"configured with -DPython3_EXECUTABLE={os.path.realpath(sys.executable)}")
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(built[0], dest)  # a copy, never a link into the build tree
        shutil.copymode(built[0], dest)
        # Whatever else the component puts into the package besides the .py
        # files (which build_py copies), e.g. libgenesis_torch_allocator.so.
        staged_pkg = os.path.dirname(built[0])
        for dirpath, _, filenames in os.walk(staged_pkg):
            for name in filenames:
                src = os.path.join(dirpath, name)
                if name.endswith(".py") or src == built[0]:
                    continue
                target = os.path.join(os.path.dirname(dest), os.path.relpath(src, staged_pkg))
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.copyfile(src, target)
                shutil.copymode(src, target)


# setuptools' own work files go under the CMake build directory: its default
# build/ is the project's Release build, and egg-info must not land in python/.
_work = os.path.join(build_dir(), "setuptools")
os.makedirs(_work, exist_ok=True)

setup(
    name="genesis",
    version=project_version(),
    description="Genesis: GPU memory-management runtime (caching allocator, storages, tensors, memory debugger)",
    package_dir={"": "python"},
    packages=find_packages("python", include=["genesis", "genesis.*"]),
    ext_modules=[CMakeExtension("genesis._C")],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    zip_safe=False,
    options={"build": {"build_base": _work}, "egg_info": {"egg_base": _work}},
)
