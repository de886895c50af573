"""An installed `genesis` Python package, used from outside the source tree.

    python3 tests/consumer/python_consumer.py SOURCE_ROOT EXPECTED_VERSION

scripts/check_install.sh runs it with the interpreter of a venv that pip
installed Genesis into, and again with PYTHONPATH at the site-packages of a
`cmake --install` prefix, from a working directory outside SOURCE_ROOT and
without the source or build tree on sys.path. It checks that the package
imported is the installed one, that every file of it is a plain copy (no
symbolic links, nothing resolving into SOURCE_ROOT), that the version is the
project's, that the extension does not need the CUDA libraries to load
(Note [CUDA loaded on first use] in src/tensor/cuda/cublas_loader.cpp), and that
a tensor op gives NumPy's result. Exit status 0 only if all hold.
"""

import os
import subprocess
import sys


def fail(message):
    print(f"python_consumer: FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def inside(path, root):
    path, root = os.path.realpath(path), os.path.realpath(root)
    return os.path.commonpath([path, root]) == root


def main():
    if len(sys.argv) != 3:
        print("usage: python_consumer.py SOURCE_ROOT EXPECTED_VERSION", file=sys.stderr)
        return 2
    source_root, expected_version = sys.argv[1], sys.argv[2]
    if inside(os.getcwd(), source_root):
        fail(f"run from a directory outside {source_root} (cwd {os.getcwd()})")

    import genesis

    package_dir = os.path.dirname(os.path.abspath(genesis.__file__))
    if inside(package_dir, source_root):
        fail(f"imported genesis from {package_dir}, inside the source tree {source_root}")
    for dirpath, dirnames, filenames in os.walk(package_dir):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            if os.path.islink(p):
                fail(f"{p} is a symbolic link (to {os.readlink(p)}); the installed package must hold copies")
            if inside(p, source_root):
                fail(f"{p} resolves into the source tree {source_root}")
    if not os.path.dirname(os.path.abspath(genesis._C.__file__)) == package_dir:
        fail(f"genesis._C comes from {genesis._C.__file__}, not from the package at {package_dir}")

    if genesis.__version__ != expected_version:
        fail(f"genesis.__version__ is {genesis.__version__!r}, expected {expected_version!r}")

    # Loading the extension must not need libcudart, cuBLAS or the driver:
    # a machine without a GPU or CUDA toolkit imports genesis too.
    needed = subprocess.run(["readelf", "-d", genesis._C.__file__], capture_output=True, text=True, check=True)
    cuda_needed = [line.split("[")[-1].rstrip("]") for line in needed.stdout.splitlines()
                   if "(NEEDED)" in line and ("libcu" in line or "libnv" in line)]
    if cuda_needed:
        fail(f"{genesis._C.__file__} needs {cuda_needed} at load time")

    import numpy as np

    a_np = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    b_np = np.linspace(-1, 1, 8, dtype=np.float32).reshape(4, 2)
    a, b = genesis.tensor(a_np.tolist()), genesis.tensor(b_np.tolist())
    got = np.array((a @ b + a.sum()).tolist(), dtype=np.float32)
    want = a_np @ b_np + a_np.sum()
    if not np.allclose(got, want, rtol=1e-5, atol=1e-5):
        fail(f"(a @ b + a.sum()) gave {got.tolist()}, NumPy {want.tolist()}")

    print(f"python_consumer: OK (genesis {genesis.__version__} from {package_dir})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
