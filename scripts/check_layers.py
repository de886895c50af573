#!/usr/bin/env python3
"""Checks that every #include in Genesis follows the layer order.

    scripts/check_layers.py [--root DIR]

Note [Layers]: Genesis is a stack of areas, each allowed to use only the areas
below it:

    core < cuda < memory < storage < tensor < python

with debug beside them (it reads the allocator, storages and tensors: it may
use memory, storage and tensor and what they use) and the tools on top of
everything. interop holds ABI descriptions shared with other libraries
(PyTorch's allocator interface) and uses nothing. Keeping the order is what
lets core build as plain values, lets the allocator be tested without a GPU,
and keeps a change in one area from rippling through the ones below it.

A second rule keeps the CUDA toolkit in one place: only the cuda area (and the
kernel code that needs device intrinsics, .cu/.cuh files and src/tensor/cuda)
includes CUDA headers or genesis/cuda/check.h, the gate to the raw runtime
API. Every other area calls CUDA through the wrappers in genesis/cuda/, which
compile to "built without CUDA" errors in one place when the toolkit is off.

An include's area comes from its target: "genesis/<area>/..." (quoted or
angled) names the area directly; any other quoted include is resolved against
the including file's directory, and counts when it lands in a scanned area.
The scan reads include/, src/, python/ and tools/ (tests, benchmarks,
examples and fuzz targets may include anything).

Exits 0 when every include is allowed, 1 (listing each forbidden edge as
file:line) otherwise, 2 on bad usage.
"""

import argparse
import os
import re
import sys

# What each area may include (itself always). Order matters only for messages.
ALLOWED = {
    "core": {"core"},
    "cuda": {"core", "cuda"},
    "memory": {"core", "cuda", "memory"},
    "storage": {"core", "cuda", "memory", "storage"},
    "tensor": {"core", "cuda", "memory", "storage", "tensor"},
    "debug": {"core", "cuda", "memory", "storage", "tensor", "debug"},
    "interop": {"interop"},
    # The extension binds every library area, the debugger included.
    "python": {"core", "cuda", "memory", "storage", "tensor", "debug", "interop", "python"},
    # The allocator shim PyTorch loads links neither Genesis nor CUDA's
    # libraries: it talks to Genesis through the interop ABI only.
    "torch_allocator": {"interop", "torch_allocator"},
    "tools": {"core", "cuda", "memory", "storage", "tensor", "debug", "interop", "tools"},
}

# Areas whose files may include CUDA headers and genesis/cuda/check.h.
RAW_CUDA_AREAS = {"cuda", "torch_allocator"}
# Files elsewhere that may, each with the reason.
RAW_CUDA_PATHS = {
    # Tensor kernels: device code and cuBLAS, the tensor layer's own.
    "src/tensor/cuda/": "tensor kernels",
}
RAW_CUDA_SUFFIXES = (".cu", ".cuh")  # device code needs the toolkit's headers
# Headers of the CUDA toolkit (angled includes only: a project file may share a prefix).
RAW_CUDA_INCLUDE = re.compile(r"^(cuda|cublas|cufft|curand|cusparse|nvrtc|driver_types|vector_types)[A-Za-z0-9_]*\.h$")
CUDA_GATE = "genesis/cuda/check.h"

SCANNED_DIRS = ("include", "src", "python", "tools")
SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh", ".inl")
INCLUDE_LINE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


def area_of_path(rel):
    """The area a file (path relative to the root, '/'-separated) belongs to, or None."""
    parts = rel.split("/")
    if len(parts) >= 3 and parts[0] == "include" and parts[1] == "genesis":
        return parts[2] if len(parts) > 3 else None  # include/genesis/version.h etc.: no area
    if len(parts) >= 3 and parts[0] == "src":
        return parts[1]
    if parts[0] == "python":
        if len(parts) >= 2 and parts[1] == "torch_allocator":
            return "torch_allocator"
        return "python"
    if parts[0] == "tools":
        return "tools"
    return None


def area_of_include(root, including_rel, target):
    """The area an include target belongs to, or None when it is outside the scan."""
    if target.startswith("genesis/"):
        parts = target.split("/")
        return parts[1] if len(parts) > 2 else None
    resolved = os.path.normpath(os.path.join(os.path.dirname(including_rel), target)).replace(os.sep, "/")
    if resolved.startswith("../") or not os.path.isfile(os.path.join(root, resolved)):
        return None
    return area_of_path(resolved)


def raw_cuda_allowed(rel, area):
    if area in RAW_CUDA_AREAS or rel.endswith(RAW_CUDA_SUFFIXES):
        return True
    return any(rel == p or (p.endswith("/") and rel.startswith(p)) for p in RAW_CUDA_PATHS)


def source_files(root):
    for top in SCANNED_DIRS:
        base = os.path.join(root, top)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "build")) and d != "tests")
            for name in sorted(filenames):
                if name.endswith(SOURCE_SUFFIXES):
                    yield os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")


def check(root):
    """Returns the list of violation messages for the tree at root."""
    problems = []
    for rel in source_files(root):
        area = area_of_path(rel)
        if area is None:
            continue
        if area not in ALLOWED:
            problems.append(f"{rel}: area '{area}' is not in the layer table of scripts/check_layers.py "
                            f"(add it with the areas it may use)")
            continue
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
        for lineno, line in enumerate(lines, 1):
            m = INCLUDE_LINE.match(line)
            if not m:
                continue
            target = m.group(2).strip()
            shown = m.group(1) + target + ('"' if m.group(1) == '"' else ">")
            raw = (m.group(1) == "<" and RAW_CUDA_INCLUDE.match(target)) or target == CUDA_GATE
            if raw and not raw_cuda_allowed(rel, area):
                problems.append(f"{rel}:{lineno}: {area} includes {shown}: only the cuda area (and kernel "
                                f"code) may use the CUDA toolkit directly; call the wrappers in "
                                f"genesis/cuda/ instead")
                continue
            to = area_of_include(root, rel, target)
            if to is None or to in ALLOWED[area]:
                continue
            allowed = ", ".join(sorted(ALLOWED[area]))
            problems.append(f"{rel}:{lineno}: forbidden edge {area} -> {to} ({shown}); "
                            f"{area} may include only: {allowed}")
    return problems


def main(argv):
    parser = argparse.ArgumentParser(description="Check the include layering of Genesis (Note [Layers]).")
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."),
                        help="the source tree to check (default: this checkout)")
    args = parser.parse_args(argv)
    root = os.path.abspath(args.root)
    if not os.path.isdir(os.path.join(root, "src")) and not os.path.isdir(os.path.join(root, "include")):
        print(f"check_layers: {root} has neither src/ nor include/: not a Genesis tree", file=sys.stderr)
        return 2
    problems = check(root)
    if problems:
        print(f"check_layers: {len(problems)} include(s) break the layer order "
              f"(core < cuda < memory < storage < tensor < python; debug beside; tools on top):",
              file=sys.stderr)
        for p in problems:
            print("  " + p, file=sys.stderr)
        return 1
    print("check_layers: every include follows the layer order")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
