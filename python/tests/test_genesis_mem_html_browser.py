"""The HTML report of genesis-mem as a browser draws it: headless Chromium
renders the page of a trace run to a PNG that must show charts and tables,
not a blank page."""

import os
import shutil
import subprocess

import pytest

import memtrace
from memtrace import run_genesis_mem

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")

pytestmark = [
    pytest.mark.skipif(memtrace.genesis_mem_path() is None, reason="genesis-mem is not built next to the package"),
    pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on PATH (chromium, chromium-browser or google-chrome)"),
]


def screenshot(page, png, width=1200, height=1600):
    # The browser is not Genesis: the sanitizer runtime that the ASan stage
    # preloads into Python (LD_PRELOAD) must not reach it, where it hangs.
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")}
    p = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--screenshot={png}", f"--window-size={width},{height}", page.as_uri()],
                       capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0 and png.exists(), p.stderr[-2000:]


def test_html_report_renders_in_a_browser(tmp_path):
    image = pytest.importorskip("matplotlib.image")
    np = pytest.importorskip("numpy")
    info = memtrace.leaky_training(tmp_path / "leaky.csv")
    page = tmp_path / "report.html"
    p = run_genesis_mem("monitor", "--all", "--trace", info.path, "--speed", "max", "--capacity", "2GiB", "-q",
                        "--html", page)
    assert p.returncode == 0, p.stderr
    png = tmp_path / "report.png"
    screenshot(page, png)
    pixels = image.imread(str(png))
    assert pixels.shape[0] == 1600 and pixels.shape[1] == 1200
    rgb = (pixels[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
    colours = np.unique(rgb, axis=0)
    # Text, four chart lines in their colours, grid lines, table borders.
    assert len(colours) >= 50, len(colours)
    assert rgb.std() > 10
    # Not a page of one colour with a little text: at least 2% of it is drawn.
    assert (rgb.min(axis=1) < 200).mean() > 0.02
    # The chart colours are there (allocated blue, reserved orange, fragmentation red).
    for r, g, b in ((0x1f, 0x77, 0xb4), (0xff, 0x7f, 0x0e), (0xd6, 0x27, 0x28)):
        near = np.abs(rgb.astype(int) - (r, g, b)).sum(axis=1) < 60
        assert near.sum() > 50, (r, g, b)
    # Every part of the report is on the page.
    text = page.read_text()
    for heading in ("Memory over time", "Fragmentation", "OOM risk", "Leaks"):
        assert heading in text
    assert "leaky.py:42 in train_step" in text
