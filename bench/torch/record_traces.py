"""Records a corpus of real allocation traces with PyTorch's own allocator
(a GPU is needed for the recording; the workloads also run on CPU with tiny
sizes, for tests).

    python bench/torch/record_traces.py record --out DIR [--workloads a,b] [--settings native,...]
    python bench/torch/record_traces.py convert --out DIR     (after record --no-convert)
    python bench/torch/record_traces.py peaks --out DIR --settings genesis [--workloads a,b] [--scale S]
    python bench/torch/record_traces.py list
    python bench/torch/record_traces.py run-one --workload NAME --out DIR [--setting S] [--record]

Every workload runs in its own process under PyTorch's native caching
allocator, with the allocator's memory history recording from before its
first allocation (torch.cuda.memory._record_memory_history, after
empty_cache and a reset of the peak statistics, with nothing allocated).
At the end the history is taken as a snapshot (torch.cuda.memory._snapshot)
and written to DIR/NAME.pickle; `genesis-mem convert` turns it into the
CSV trace DIR/NAME.trace.csv.gz (the conversion lives in Genesis, not
here), and DIR/NAME.json (the sidecar) says what ran: model, workload,
steps, the trace's peak live bytes, PyTorch's own peak reserved and
allocated bytes of the same run (torch.cuda.max_memory_reserved/allocated),
device, torch version, date, command, and whether the history ring dropped
events. `genesis-mem replay --corpus DIR` replays them all.

--settings adds runs of the same workloads (same seed, same shapes) under
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True and
backend:cudaMallocAsync, in their own processes, without recording: only
their peak reserved and allocated bytes go into the sidecar, so that each
trace has PyTorch's best setting to be compared with. They repeat exactly
the iterations of the recorded run; they measure no time, so --parallel N
runs N of them at once. The setting `genesis` runs the workload with
Genesis as PyTorch's allocator (genesis.torch.use_genesis_allocator, its
defaults) and stores its peaks apart, under the sidecar's "genesis_torch"
(never among PyTorch's settings, whose best is what Genesis is judged
against). `peaks` adds such runs to a corpus recorded before: for each
sidecar of --out it repeats the recorded run's iterations under each
--settings setting (--scale must be the recording's: some workloads size
their epochs by it; a sidecar that names its scale is repeated at that).

Workloads (models built from configs: nothing is downloaded):
  llm_train      GPT-2 124M (transformers GPT2Config), bf16 autocast, AdamW;
                 batch size and sequence length change every step
  llm_serve      a small decoder-only transformer answering requests in
                 batches of 16-64: prompts of varying length, a KV cache per layer
                 grown by one token per decode step (torch.cat, as
                 transformers' DynamicCache), finished requests dropped
                 from the batch (index_select), thousands of requests
  vision_train   torchvision resnet50 training, bf16 autocast, SGD; each
                 epoch ends with a short batch
  diffusion_unet a UNet2DModel (diffusers when installed, else a UNet of
                 the same shape in plain PyTorch) trained to predict noise,
                 then a few denoising steps of sampling
  bert_dynamic   BERT-base classification (transformers BertConfig), every
                 batch padded to its longest sequence
  multi_stream   training with the next batch prefetched from pinned host
                 memory on a side stream (record_stream) and an auxiliary
                 head computed on a second compute stream
  long_run       hundreds of steps of a small GPT-2 (4 layers)
  epochs_eval    training epochs with an eval pass between them at 4x the
                 batch size; torch.cuda.empty_cache() after every phase
                 (so the trace shows segments returned and grown again)
  moe_train      a mixture of experts (transformers MixtralConfig, 8 experts,
                 top 2): expert activations sized by the routing, batch and
                 sequence length changing every step
  llm_generate   transformers' generate() on a Llama-style model: batches of
                 1-48 left-padded prompts, 8-128 new tokens, dynamic KV cache
  seq2seq_train  a T5-small-like encoder-decoder, source and target lengths
                 drawn independently every step
  detection_train torchvision Faster R-CNN (ResNet-50 FPN) training on
                 images of different shapes with 1-30 boxes each
  lora_finetune  LoRA adapters (peft) on a frozen bf16 Llama-style model,
                 activation checkpointing, gradient accumulation over
                 micro-batches of different shapes

GENESIS_TRACE_SCALE (or --scale, default 1) scales every workload's steps
or requests and its time limit: a recorded run stops its main loop after
--max-seconds (default 20 s x scale) and says how far it got, so each
recording takes about half a minute on an H100 or H200 at scale 1, its
start-up included (the thirteen: about seven minutes; --workloads picks
some).
"""

import argparse
import datetime
import json
import os
import pickle
import shlex
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from trace_workloads import WORKLOADS, Env  # noqa: E402  (beside this file)

SETTINGS = {
    "native": None,
    "expandable_segments": "expandable_segments:True",
    "cudaMallocAsync": "backend:cudaMallocAsync",
    "genesis": None,  # Genesis as PyTorch's allocator (use_genesis_allocator)
}
# Settings whose peaks are PyTorch's own (the sidecar's "pytorch"); the
# others are stored under their own keys (SIDECAR_KEY).
PYTORCH_SETTINGS = ("native", "expandable_segments", "cudaMallocAsync")
SIDECAR_KEY = {"genesis": "genesis_torch"}
# History entries kept by PyTorch's ring: more than any workload here makes at
# scale 1, and few enough that genesis-mem's bounded pickle reader takes
# the snapshot (about ten pickle objects per entry, at most 16 Mi objects).
DEFAULT_MAX_ENTRIES = 1_500_000
# A workload's main loop stops after this many seconds (times the scale):
# a recording then takes about half a minute with its start-up, and the
# runs under the other settings repeat the same iterations.
DEFAULT_MAX_SECONDS = 20.0


# ------------------------------------------------------------------ history ---
def history_info(snapshot, max_entries):
    """What the snapshot's history holds for its busiest device, and whether
    PyTorch's ring (max_entries) may have dropped early events: it keeps the
    last max_entries entries, so a full ring means the start is lost."""
    traces = snapshot.get("device_traces", [])
    device = max(range(len(traces)), key=lambda d: len(traces[d])) if traces else -1
    entries = len(traces[device]) if traces else 0
    first = traces[device][0]["action"] if entries else None
    return {"device_index": device, "entries": entries, "max_entries": max_entries,
            "dropped": entries >= max_entries, "first_action": first}


def convert(genesis_mem, pickle_path, trace_path):
    """`genesis-mem convert --json`: the CSV trace and what it holds."""
    p = subprocess.run([str(genesis_mem), "convert", str(pickle_path), str(trace_path), "--json"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"genesis-mem convert {pickle_path}: {(p.stderr or p.stdout).strip()[-800:]}")
    return json.loads(p.stdout)


def find_genesis_mem(explicit=None):
    for c in [explicit, os.environ.get("GENESIS_MEM"), os.path.join(ROOT, "build", "genesis-mem"),
              os.path.join(ROOT, "build-dev", "genesis-mem"), shutil.which("genesis-mem")]:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def sidecar(name, info, peaks, history=None, converted=None, command=None):
    """The JSON sidecar of a trace (Note [Trace corpus] in
    include/genesis/debug/replay_corpus.h: genesis-mem reads "pytorch")."""
    out = {"name": name, "model": info.get("model"), "workload": info.get("workload"), "steps": info.get("steps")}
    for k, v in info.items():
        if k not in ("model", "workload", "steps", "device", "torch", "seconds"):
            out[k] = v
    if converted is not None:
        out["peak_live_bytes"] = converted["peak_live_bytes"]
        out["events"] = converted["events"]
        out["trace_counts"] = converted["counts"]
    out["pytorch"] = peaks
    out["history"] = history
    out["device"] = info.get("device")
    out["torch"] = info.get("torch")
    out["date"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    out["command"] = command
    return out


# --------------------------------------------------------------------- runs ---
def run_one(workload, setting, out_dir, record, scale, seed, max_entries, stacks, device="cuda", max_seconds=None,
            fixed=None):
    """One workload in this process. Returns its JSON result."""
    import torch

    res = {"workload_name": workload, "setting": setting, "torch": torch.__version__}
    gt = None
    if device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("record_traces.py: needs a CUDA GPU (or --device cpu for a tiny dry run)")
        if setting == "genesis":
            if record:
                raise SystemExit("record_traces.py: the recorded run is PyTorch's native allocator, not genesis")
            import genesis.torch as gt  # before CUDA initialises: the allocator is chosen once

            gt.use_genesis_allocator()
        torch.cuda.init()
        res["device"] = torch.cuda.get_device_name()
        torch.backends.cudnn.benchmark = False  # the same kernels, so the same workspaces, in every run
        # Nothing may be allocated yet: the trace starts from an empty allocator.
        if gt is None:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            if torch.cuda.memory_allocated() != 0:
                raise RuntimeError("memory allocated before the workload started")
        if record:
            torch.cuda.memory._record_memory_history(enabled="all", context="alloc" if stacks else None,
                                                     stacks="python", max_entries=max_entries, clear_history=True)
    else:
        res["device"] = "cpu"
    env = Env(torch, device, scale, seed, max_seconds=max_seconds, fixed=fixed)
    t0 = time.perf_counter()
    info = WORKLOADS[workload](env)
    res["iterations"] = env.count  # of the main loop: what runs under other settings repeat
    if device == "cuda":
        torch.cuda.synchronize()
    res["seconds"] = round(time.perf_counter() - t0, 2)
    res.update(info)
    if device == "cuda" and gt is not None:
        st = gt.memory_stats()  # PyTorch's own statistics do not see a pluggable allocator
        res["peak_reserved_bytes"] = st["reserved_bytes.all.peak"]
        res["peak_allocated_bytes"] = st["allocated_bytes.all.peak"]
        res["peak_requested_bytes"] = st.get("requested_bytes.all.peak")
    elif device == "cuda":
        res["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
        res["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
        if record:
            snap = torch.cuda.memory._snapshot()
            torch.cuda.memory._record_memory_history(enabled=None)
            res["history"] = history_info(snap, max_entries)
            path = os.path.join(out_dir, workload + ".pickle")
            with open(path, "wb") as f:
                pickle.dump(snap, f, protocol=pickle.HIGHEST_PROTOCOL)
            res["pickle"] = path
    return res


def child(args_list, setting):
    """This script in a fresh interpreter with PYTORCH_CUDA_ALLOC_CONF set
    for `setting`; its last stdout line is JSON."""
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if SETTINGS[setting]:
        env["PYTORCH_CUDA_ALLOC_CONF"] = SETTINGS[setting]
    cmd = [sys.executable, os.path.abspath(__file__), "run-one", "--setting", setting, *args_list]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"ok": False, "error": (p.stderr or p.stdout).strip()[-1500:]}
    r = json.loads(lines[-1])
    r["ok"] = True
    return r


def record_all(args):
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    names = args.workloads.split(",") if args.workloads else list(WORKLOADS)
    for n in names:
        if n not in WORKLOADS:
            raise SystemExit(f"record_traces.py: unknown workload '{n}' (expected one of {', '.join(WORKLOADS)})")
    settings = args.settings.split(",")
    for s in settings:
        if s not in SETTINGS:
            raise SystemExit(f"record_traces.py: unknown setting '{s}' (expected {', '.join(SETTINGS)})")
    genesis_mem = None
    if not args.no_convert:
        genesis_mem = find_genesis_mem(args.genesis_mem)
        if genesis_mem is None:
            raise SystemExit("record_traces.py: genesis-mem not found (build target genesis-mem, or --genesis-mem "
                             "PATH; or --no-convert, then the convert command)")
    common = ["--out", out, "--scale", str(args.scale), "--seed", str(args.seed), "--max-entries",
              str(args.max_entries), "--max-seconds", str(args.max_seconds)] + (["--stacks"] if args.stacks else [])
    command = " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv])
    # 1. The recordings, one at a time (each alone on the GPU), each converted
    # and given its sidecar at once: a run cut short keeps what it finished.
    sidecars, failed = {}, 0
    for n in names:
        t0 = time.perf_counter()
        r = child(["--workload", n, "--record", *common], "native")
        line = {"workload": n, "ok": r["ok"], "seconds": round(time.perf_counter() - t0, 1)}
        if not r["ok"]:
            failed += 1
            line["error"] = r["error"][-300:]
            print(json.dumps(line), flush=True)
            with open(os.path.join(out, n + ".failed.json"), "w") as f:
                json.dump({"name": n, "error": r["error"], "command": command}, f, indent=1)
            continue
        info = {k: v for k, v in r.items() if k not in ("ok", "history", "pickle", "peak_reserved_bytes",
                                                         "peak_allocated_bytes", "setting", "workload_name")}
        peaks = {"native": {"peak_reserved_bytes": r["peak_reserved_bytes"],
                            "peak_allocated_bytes": r["peak_allocated_bytes"], "seconds": r.get("seconds")}}
        converted = None
        if genesis_mem is not None:
            try:
                converted = convert(genesis_mem, r["pickle"], os.path.join(out, n + ".trace.csv.gz"))
            except RuntimeError as e:
                failed += 1
                info["conversion_error"] = str(e)
        side = sidecar(n, info, peaks, r["history"], converted, command)
        side["scale"] = args.scale  # what a later run must repeat it at (`peaks`)
        sidecars[n] = side
        write_json(os.path.join(out, n + ".json"), side)
        line.update(steps=side["steps"], peak_live=side.get("peak_live_bytes"), peak_reserved=r["peak_reserved_bytes"],
                    peak_allocated=r["peak_allocated_bytes"], entries=r["history"]["entries"],
                    dropped=r["history"]["dropped"],
                    unknown_frees=converted["counts"]["unknown_frees"] if converted else None)
        print(json.dumps(line), flush=True)

    # 2. Peaks under the other settings: nothing is timed, so several at once;
    # each sidecar is rewritten as its runs finish.
    # A failed run keeps its error in the sidecar; the recording stands.
    run_peaks(out, sidecars, [(n, s) for n in sidecars for s in settings if s != "native"], args)
    for n, side in sidecars.items():
        figs = {s: f["peak_reserved_bytes"] for s, f in side["pytorch"].items()
                if s in PYTORCH_SETTINGS and "peak_reserved_bytes" in f}
        best = min(figs, key=figs.get) if figs else None
        print(json.dumps({"trace": n, "steps": side["steps"], "peak_live": side.get("peak_live_bytes"),
                          "pytorch_reserved": figs, "best": best}), flush=True)
    return 1 if failed else 0


def peak_figures(r):
    """What a peak-only run adds to a sidecar (or its error)."""
    if not r["ok"]:
        return {"error": r["error"][-300:]}
    fig = {"peak_reserved_bytes": r["peak_reserved_bytes"], "peak_allocated_bytes": r["peak_allocated_bytes"],
           "seconds": r.get("seconds")}
    if r.get("peak_requested_bytes") is not None:
        fig["peak_requested_bytes"] = r["peak_requested_bytes"]
    return fig


def store_peaks(side, setting, r):
    """A run's peaks into the sidecar: PyTorch's settings under "pytorch",
    Genesis's under its own key (SIDECAR_KEY)."""
    fig = peak_figures(r)
    key = SIDECAR_KEY.get(setting)
    if key is None:
        side.setdefault("pytorch", {})[setting] = fig
    else:
        live, req = side.get("peak_live_bytes"), fig.get("peak_requested_bytes")
        if "peak_reserved_bytes" in fig and live:
            # The ratio is like for like only if the run asked for what the
            # recorded run did (a workload edited since its recording does not).
            if isinstance(req, int) and abs(req - live) > live // 1000:
                fig["not_repeated"] = (f"peak of requested bytes {req}, the recorded run's peak live bytes {live}: "
                                       "the workload no longer repeats its recording, so no ratio to it is kept")
            else:
                fig["reserved_per_live"] = round(fig["peak_reserved_bytes"] / live, 4)
        side[key] = fig


def peaks_all(args):
    """Peak-only runs of --settings for the sidecars of --out (a corpus
    recorded before), each repeating its recorded run's iterations."""
    out = os.path.abspath(args.out)
    if not os.path.isdir(out):
        raise SystemExit(f"record_traces.py: peaks: {out} is not a folder of recorded traces")
    settings = args.settings.split(",")
    for s in settings:
        if s not in SETTINGS or s == "native":
            raise SystemExit(f"record_traces.py: peaks: setting '{s}' (expected some of "
                             f"{', '.join(x for x in SETTINGS if x != 'native')}; native is the recorded run)")
    names = args.workloads.split(",") if args.workloads else sorted(
        f[:-len(".json")] for f in os.listdir(out)
        if f.endswith(".json") and f[:-len(".json")] in WORKLOADS)
    if not args.workloads:  # sidecars written before the count was kept cannot be repeated exactly
        for n in [n for n in names if not isinstance(read_sidecar(out, n).get("iterations"), int)]:
            print(json.dumps({"workload": n, "skipped": "its sidecar has no recorded iteration count"}), flush=True)
            names.remove(n)
    sidecars = {}
    for n in names:
        if n not in WORKLOADS:
            raise SystemExit(f"record_traces.py: unknown workload '{n}' (expected one of {', '.join(WORKLOADS)})")
        path = os.path.join(out, n + ".json")
        if not os.path.exists(path):
            raise SystemExit(f"record_traces.py: peaks: no sidecar {path} (record the workload first)")
        with open(path) as f:
            side = json.load(f)
        if not isinstance(side.get("iterations"), int) or side["iterations"] < 1:
            raise SystemExit(f"record_traces.py: peaks: {path} has no recorded iteration count")
        sidecars[n] = side
    return 1 if run_peaks(out, sidecars, [(n, s) for n in sidecars for s in settings], args) else 0


def run_peaks(out, sidecars, runs, args):
    """Peak-only runs of (workload, setting) pairs, --parallel at once
    (nothing is timed), each repeating its sidecar's iterations at its scale
    (else --scale: some workloads size their epochs by it); each sidecar is
    rewritten as its runs finish. Returns how many runs failed."""

    def peak_run(ns):
        n, s = ns
        common = ["--out", out, "--scale", str(sidecars[n].get("scale", args.scale)), "--seed", str(args.seed),
                  "--max-entries", str(args.max_entries), "--max-seconds", str(args.max_seconds)]
        return ns, child(["--workload", n, "--fixed", str(sidecars[n]["iterations"]), *common], s)

    failed = 0
    with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        for (n, s), r in pool.map(peak_run, runs):
            failed += 0 if r["ok"] else 1
            store_peaks(sidecars[n], s, r)
            write_json(os.path.join(out, n + ".json"), sidecars[n])
            line = {"workload": n, "setting": s, **peak_figures(r)}
            key = SIDECAR_KEY.get(s)
            for k in ("reserved_per_live", "not_repeated"):
                if key and k in sidecars[n].get(key, {}):
                    line[k] = sidecars[n][key][k]
            print(json.dumps(line), flush=True)
    return failed


def read_sidecar(out, name):
    path = os.path.join(out, name + ".json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def convert_all(args):
    """Converts every NAME.pickle of --out that has a sidecar (a recording
    made with --no-convert) and completes the sidecar."""
    out = os.path.abspath(args.out)
    genesis_mem = find_genesis_mem(args.genesis_mem)
    if genesis_mem is None:
        raise SystemExit("record_traces.py: genesis-mem not found (build target genesis-mem, or --genesis-mem PATH)")
    failed = 0
    names = sorted(f[:-len(".pickle")] for f in os.listdir(out) if f.endswith(".pickle"))
    if not names:
        raise SystemExit(f"record_traces.py: no NAME.pickle in {out}")
    for n in names:
        side_path = os.path.join(out, n + ".json")
        side = {}
        if os.path.exists(side_path):
            with open(side_path) as f:
                side = json.load(f)
        try:
            c = convert(genesis_mem, os.path.join(out, n + ".pickle"), os.path.join(out, n + ".trace.csv.gz"))
            side.update(peak_live_bytes=c["peak_live_bytes"], events=c["events"], trace_counts=c["counts"])
            side.pop("conversion_error", None)
            print(json.dumps({"trace": n, "peak_live": c["peak_live_bytes"], "events": c["events"],
                              "unknown_frees": c["counts"]["unknown_frees"]}), flush=True)
        except RuntimeError as e:
            failed += 1
            side["conversion_error"] = str(e)
            print(json.dumps({"trace": n, "error": str(e)[-300:]}), flush=True)
        write_json(side_path, side)
    return 1 if failed else 0


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    scale_default = float(os.environ.get("GENESIS_TRACE_SCALE", "1"))

    def common(p):
        p.add_argument("--out", required=True, help="output folder")
        p.add_argument("--scale", type=float, default=scale_default, help="steps scale (GENESIS_TRACE_SCALE)")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--max-entries", type=int, default=DEFAULT_MAX_ENTRIES,
                       help="PyTorch's history ring size (a full ring has dropped early events)")
        p.add_argument("--stacks", action="store_true", help="record Python stacks of allocations (large pickles)")
        p.add_argument("--max-seconds", type=float, default=None,
                       help="stop a workload's main loop after this long (default 20 s x scale; Note [Bounded "
                            "workloads])")

    r = sub.add_parser("record", help="record every workload (or --workloads) into --out")
    common(r)
    r.add_argument("--workloads", help="comma list (default: all)")
    r.add_argument("--settings", default="native",
                   help="comma list of native, expandable_segments, cudaMallocAsync, genesis: peaks under each "
                        "(native is the recorded run; genesis is Genesis as PyTorch's allocator, kept apart)")
    r.add_argument("--all-settings", action="store_true", help="--settings native,expandable_segments,cudaMallocAsync")
    r.add_argument("--parallel", type=int, default=2, help="peak-only runs at once")
    r.add_argument("--genesis-mem", help="genesis-mem executable (default: build/, build-dev/, PATH)")
    r.add_argument("--no-convert", action="store_true", help="leave NAME.pickle unconverted (see convert)")
    pk = sub.add_parser("peaks", help="peak-only runs of --settings for the sidecars of --out (a recorded corpus)")
    common(pk)
    pk.add_argument("--workloads", help="comma list (default: every sidecar of --out)")
    pk.add_argument("--settings", default="genesis", help="comma list of expandable_segments, cudaMallocAsync, genesis")
    pk.add_argument("--parallel", type=int, default=2, help="runs at once")
    c = sub.add_parser("convert", help="convert the NAME.pickle files of --out (after record --no-convert)")
    c.add_argument("--out", required=True)
    c.add_argument("--genesis-mem")
    o = sub.add_parser("run-one", help="one workload in this process (what record runs per workload)")
    common(o)
    o.add_argument("--workload", choices=list(WORKLOADS), required=True)
    o.add_argument("--setting", choices=list(SETTINGS), default="native")
    o.add_argument("--record", action="store_true", help="record the history and write NAME.pickle")
    o.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: tiny sizes, no trace")
    o.add_argument("--fixed", type=int, help="run the main loop exactly this many times (no time limit)")
    sub.add_parser("list", help="the workloads")
    args = ap.parse_args()
    if args.cmd == "list":
        for n, f in WORKLOADS.items():
            print(n)
        return 0
    if args.cmd == "convert":
        return convert_all(args)
    if args.max_seconds is None:
        args.max_seconds = DEFAULT_MAX_SECONDS * args.scale
    if args.cmd == "peaks":
        return peaks_all(args)
    if args.cmd == "run-one":
        os.makedirs(args.out, exist_ok=True)
        res = run_one(args.workload, args.setting, args.out, args.record, args.scale, args.seed, args.max_entries,
                      args.stacks, args.device, args.max_seconds, args.fixed)
        print(json.dumps(res), flush=True)
        return 0
    if args.all_settings:
        args.settings = ",".join(PYTORCH_SETTINGS)
    return record_all(args)


if __name__ == "__main__":
    sys.exit(main())
