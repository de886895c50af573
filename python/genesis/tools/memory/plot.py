#!/usr/bin/env python3
"""Draws the PNG plots of a genesis-mem report (genesis-mem --plot runs this
file as a script; it needs only matplotlib, not the genesis package).

    plot.py REPORT.json OUTPUT.png

Memory over time (allocated, reserved, used, capacity) for every device of a
profile or monitor report, and fragmentation over time for a fragment
report; one panel per device. Uses matplotlib without a display.
"""

import json
import sys


def series(points, key):
    return [p.get(key) for p in points]


def device_points(dev):
    for key in ("history", "samples"):
        pts = dev.get(key)
        if isinstance(pts, list) and pts and isinstance(pts[0], dict) and "t" in pts[0]:
            return pts
    return []


def collect(report):
    """{device id: points} from any report kind (monitor reports nest the others)."""
    found = {}

    def walk(obj):
        if not isinstance(obj, dict):
            return
        devices = obj.get("devices")
        if isinstance(devices, dict):
            for dev_id, dev in devices.items():
                if isinstance(dev, dict):
                    pts = device_points(dev)
                    if pts and len(pts) > len(found.get(dev_id, [])):
                        found[dev_id] = pts
        for value in obj.values():
            if isinstance(value, dict):
                walk(value)

    walk(report)
    return found


def main(argv):
    if len(argv) != 3:
        print("usage: genesis_mem_plot.py REPORT.json OUTPUT.png", file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"matplotlib is not installed for {sys.executable} ({e}): install python3-matplotlib",
              file=sys.stderr)
        return 3
    with open(argv[1], encoding="utf-8") as f:
        report = json.load(f)
    devices = collect(report)
    if not devices:
        print(f"{argv[1]} has no samples over time to plot", file=sys.stderr)
        return 1
    gib = float(1 << 30)
    fig, axes = plt.subplots(len(devices), 2, figsize=(13, 3.6 * len(devices)), squeeze=False)
    for row, (dev_id, pts) in enumerate(sorted(devices.items())):
        t = series(pts, "t")
        ax = axes[row][0]
        for key, label in (("allocated", "allocated"), ("reserved", "reserved"), ("used", "used (driver)"),
                           ("total", "capacity")):
            ys = series(pts, key)
            if any(y is not None for y in ys):
                ax.plot(t, [None if y is None else y / gib for y in ys], label=label,
                        linestyle="--" if key == "total" else "-")
        ax.set_title(f"device {dev_id}: memory")
        ax.set_xlabel("seconds")
        ax.set_ylabel("GiB")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
        ax = axes[row][1]
        frag = series(pts, "fragmentation")
        if any(f is not None for f in frag):
            ax.plot(t, frag, color="tab:red", label="fragmentation (cached / reserved, %)")
        ext = series(pts, "external_fragmentation")
        if any(f is not None for f in ext):
            ax.plot(t, ext, color="tab:purple", label="1 - largest free / free (%)")
        ax.set_title(f"device {dev_id}: fragmentation")
        ax.set_xlabel("seconds")
        ax.set_ylabel("%")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    source = report.get("source", "")
    if source:
        fig.suptitle(source, fontsize=10)
    fig.tight_layout()
    fig.savefig(argv[2], dpi=100)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
