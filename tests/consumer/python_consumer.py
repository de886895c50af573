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
a tensor op gives NumPy's result (or, without NumPy, the sums written
out). Exit status 0 only if all hold.
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

    # A small op against a reference: NumPy's where the interpreter has it
    # (a venv made from another venv does not see its packages), else the
    # same sums written out.
    a_rows = [[float(4 * i + j - 5) for j in range(4)] for i in range(3)]
    b_rows = [[-1.0 + 2.0 * (2 * i + j) / 7.0 for j in range(2)] for i in range(4)]
    a, b = genesis.tensor(a_rows), genesis.tensor(b_rows)
    got = (a @ b + a.sum()).tolist()
    try:
        import numpy as np
    except ImportError:
        total = sum(map(sum, a_rows))
        want = [[sum(a_rows[i][k] * b_rows[k][j] for k in range(4)) + total for j in range(2)] for i in range(3)]
        reference = "Python"
    else:
        a_np, b_np = np.array(a_rows, dtype=np.float32), np.array(b_rows, dtype=np.float32)
        want = (a_np @ b_np + a_np.sum()).tolist()
        reference = "NumPy"
    close = all(abs(g - w) <= 1e-5 + 1e-5 * abs(w) for gr, wr in zip(got, want) for g, w in zip(gr, wr))
    if len(got) != 3 or any(len(r) != 2 for r in got) or not close:
        fail(f"(a @ b + a.sum()) gave {got}, {reference} {want}")

    print(f"python_consumer: OK (genesis {genesis.__version__} from {package_dir}; op checked against {reference})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
