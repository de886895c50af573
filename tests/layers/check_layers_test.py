#!/usr/bin/env python3
"""Tests of scripts/check_layers.py on small fixture trees.

    python3 tests/layers/check_layers_test.py

Each test writes a tree with a few sources into a temporary directory and runs
the checker on it as CI does (a separate process, --root), then looks at the
exit status and the message.
"""

import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CHECKER = os.path.join(ROOT, "scripts", "check_layers.py")


def run_checker(root):
    return subprocess.run([sys.executable, CHECKER, "--root", root], capture_output=True, text=True, check=False)


class FixtureTree:
    def __init__(self):
        self._dir = tempfile.TemporaryDirectory()
        self.root = self._dir.name

    def write(self, rel, text):
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(textwrap.dedent(text))

    def cleanup(self):
        self._dir.cleanup()


class CheckLayersTest(unittest.TestCase):
    def setUp(self):
        self.tree = FixtureTree()
        # A well-layered tree: every area uses only what is below it.
        self.tree.write("include/genesis/core/device.h", "#pragma once\n#include <string>\n")
        self.tree.write("src/core/device.cpp", '#include "genesis/core/device.h"\n')
        self.tree.write("include/genesis/cuda/stream.h", '#pragma once\n#include "genesis/core/device.h"\n')
        self.tree.write("src/cuda/stream.cpp", '#include "genesis/cuda/stream.h"\n#include <cuda_runtime.h>\n')
        self.tree.write("src/memory/alloc.cpp", '#include "genesis/cuda/stream.h"\n#include "genesis/core/device.h"\n')
        self.tree.write("src/storage/storage_internal.h", "#pragma once\n")
        self.tree.write("src/storage/storage.cpp", '#include "storage_internal.h"\n#include <genesis/memory/a.h>\n')
        self.tree.write("src/tensor/cuda/kernels.cpp", "#include <cublas_v2.h>\n")
        self.tree.write("src/debug/trace.cpp", '#include "genesis/tensor/tensor.h"\n#include "genesis/storage/s.h"\n')
        self.tree.write("python/src/module.cpp", '#include "genesis/debug/trace.h"\n#include "genesis/tensor/t.h"\n')
        self.tree.write("tools/genesis-mem/main.cpp", '#include "genesis/debug/trace.h"\n')
        # Tests may include anything; they are not scanned.
        self.tree.write("tests/core/device_test.cpp", '#include "genesis/python/x.h"\n#include <cuda_runtime.h>\n')

    def tearDown(self):
        self.tree.cleanup()

    def assert_fails_with(self, *fragments):
        result = run_checker(self.tree.root)
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        for fragment in fragments:
            self.assertIn(fragment, result.stderr)
        return result

    def test_a_well_layered_tree_passes(self):
        result = run_checker(self.tree.root)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("every include follows the layer order", result.stdout)

    def test_core_including_cuda_fails_naming_file_line_and_edge(self):
        self.tree.write("src/core/device.cpp", '#include "genesis/core/device.h"\n\n#include "genesis/cuda/stream.h"\n')
        self.assert_fails_with("src/core/device.cpp:3:", "core -> cuda", '"genesis/cuda/stream.h"',
                               "core may include only: core")

    def test_an_upward_edge_in_a_public_header_fails(self):
        self.tree.write("include/genesis/cuda/stream.h", '#pragma once\n#include "genesis/memory/upstream.h"\n')
        self.assert_fails_with("include/genesis/cuda/stream.h:2:", "cuda -> memory")

    def test_angled_genesis_includes_count(self):
        self.tree.write("src/memory/alloc.cpp", "#include <genesis/storage/storage.h>\n")
        self.assert_fails_with("src/memory/alloc.cpp:1:", "memory -> storage")

    def test_a_relative_include_into_another_area_fails(self):
        self.tree.write("src/memory/alloc.cpp", '#include "../storage/storage_internal.h"\n')
        self.assert_fails_with("src/memory/alloc.cpp:1:", "memory -> storage")

    def test_tensor_may_not_use_debug(self):
        self.tree.write("src/tensor/ops.cpp", '#  include "genesis/debug/trace.h"\n')
        self.assert_fails_with("src/tensor/ops.cpp:1:", "tensor -> debug")

    def test_the_library_may_not_use_the_bindings_or_tools(self):
        self.tree.write("src/debug/x.cpp", '#include "genesis/python/module.h"\n')
        self.assert_fails_with("debug -> python")

    def test_cuda_headers_outside_the_cuda_area_fail(self):
        self.tree.write("src/storage/copy.cpp", "#include <cuda_runtime_api.h>\n")
        self.tree.write("src/debug/replay.cpp", '#include "genesis/cuda/check.h"\n')
        result = self.assert_fails_with("src/storage/copy.cpp:1:", "<cuda_runtime_api.h>", "src/debug/replay.cpp:1:",
                                        '"genesis/cuda/check.h"', "wrappers in genesis/cuda/")
        self.assertIn("2 include(s)", result.stderr)

    def test_kernel_files_may_use_cuda_headers(self):
        self.tree.write("src/storage/convert.cu", '#include <cuda_runtime.h>\n#include "genesis/cuda/check.h"\n')
        result = run_checker(self.tree.root)
        self.assertEqual(result.returncode, 0, result.stderr)

    def test_a_project_header_named_like_a_cuda_header_is_not_cuda(self):
        self.tree.write("src/debug/cuda_like.h", "#pragma once\n")
        self.tree.write("src/debug/x.cpp", '#include "cuda_like.h"\n')
        result = run_checker(self.tree.root)
        self.assertEqual(result.returncode, 0, result.stderr)

    def test_an_unknown_area_is_reported(self):
        self.tree.write("src/gadgets/x.cpp", '#include "genesis/core/device.h"\n')
        self.assert_fails_with("src/gadgets/x.cpp", "not in the layer table")

    def test_a_directory_that_is_not_a_source_tree_is_a_usage_error(self):
        with tempfile.TemporaryDirectory() as empty:
            result = run_checker(empty)
        self.assertEqual(result.returncode, 2)
        self.assertIn("not a Genesis tree", result.stderr)

    def test_this_checkout_follows_the_layers(self):
        result = run_checker(ROOT)
        self.assertEqual(result.returncode, 0, result.stderr)


if __name__ == "__main__":
    unittest.main()
