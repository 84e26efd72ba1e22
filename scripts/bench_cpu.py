#!/usr/bin/env python3
"""Holmes' burn paths against ONNX Runtime on the reference 1-D ResNeXt, interleaved in one run.

A port of ../shared/bench/ort-peer/bench_driver.py to `holmes bench-cpu --serve`. Engines,
alive at once and run in rotating rounds: burn's plain path, burn's fast path (both through
one `holmes bench-cpu --serve` process, flex backend, rayon's default thread count) and
onnxruntime (CPU EP, intra_op_num_threads=THREADS). Before timing each (W, D, batch), burn's
outputs on the timing input are checked against ORT's (max abs diff < 1e-3), for both paths.
Reports medians, p10-p90, GMAC/s, the burn/ORT ratio and the share of the sgemm ceiling
measured with the yardstick's gemm_ceiling.py at the start and again at the end (the share
uses their mean: a shared host's speed drifts over minutes), or given with --ceiling-gmacs.

Setup:  python3 -m venv /tmp/venv && /tmp/venv/bin/pip install onnx onnxruntime numpy
        for c in 8x2 32x4 64x8 128x16; do
          /tmp/venv/bin/python ../shared/bench/ort-peer/gen_onnx.py ${c%x*} ${c#*x} --outdir /tmp/ortpeer
        done
        cargo build --release
Run:    /tmp/venv/bin/python scripts/bench_cpu.py --models /tmp/ortpeer
"""
import argparse
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PEER = os.path.join(ROOT, "..", "shared", "bench", "ort-peer")
L_IN = 7500
SWITCH_SLEEP = 0.05
TOLERANCE = 1e-3


def make_session(path, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def synth_input(batch, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(L_IN) / 250.0
    return (0.8 * np.sin(2 * np.pi * 1.2 * t)[None, None, :]
            + rng.uniform(-0.5, 0.5, (batch, 1, L_IN))).astype(np.float32)


def ort_times(sess, x, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        sess.run(["logits"], {"x": x})
        out.append((time.perf_counter() - t0) * 1e3)
    return out


class Holmes:
    """`holmes bench-cpu --serve`: load W D / run PATH B N / eval PATH FILE B."""

    def __init__(self, exe, models):
        self.p = subprocess.Popen([exe, "bench-cpu", "--serve", "--weights", models],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def cmd(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        resp = self.p.stdout.readline().strip()
        if not resp or resp.startswith("err"):
            raise RuntimeError(f"holmes bench-cpu: {line!r} -> {resp!r}")
        return resp

    def run(self, path, batch, n):
        return [float(t) for t in self.cmd(f"run {path} {batch} {n}").split()[1:]]

    def eval(self, path, x):
        with tempfile.NamedTemporaryFile(suffix=".bin", delete=False) as f:
            x.astype("<f4").tofile(f)
            name = f.name
        try:
            v = [float(t) for t in self.cmd(f"eval {path} {name} {x.shape[0]}").split()[1:]]
        finally:
            os.unlink(name)
        return np.array(v, dtype=np.float32).reshape(x.shape[0], 2)

    def close(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.flush()
        except BrokenPipeError:
            pass
        self.p.wait(timeout=30)


def pct(v, q):
    v = sorted(v)
    i = (len(v) - 1) * q
    lo, hi = math.floor(i), math.ceil(i)
    return v[lo] + (v[hi] - v[lo]) * (i - lo)


def sgemm_ceiling(threads):
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, os.path.join(PEER, "gemm_ceiling.py"), "4096", "5"],
                         env=env, capture_output=True, text=True, check=True).stdout
    print(out.strip(), flush=True)
    return float(re.search(r"= ([\d.]+) GMAC/s", out).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exe", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")),
                                               "release", "holmes"))
    ap.add_argument("--models", required=True, help="gen_onnx.py's --outdir")
    ap.add_argument("--configs", default="8x2,32x4,64x8,128x16")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--engines", default="plain,fast,ort", help="subset of plain,fast,ort")
    ap.add_argument("--threads", type=int, default=2, help="ORT intra-op threads")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--min-runs", type=int, default=8)
    ap.add_argument("--max-runs", type=int, default=60)
    ap.add_argument("--target-s", type=float, default=1.5, help="approx. timed seconds per engine per point")
    ap.add_argument("--ceiling-gmacs", type=float, help="sgemm ceiling; measured when not given")
    a = ap.parse_args()
    configs = [tuple(map(int, c.split("x"))) for c in a.configs.split(",")]
    batches = [int(b) for b in a.batches.split(",")]
    wanted = a.engines.split(",")
    ceilings = [a.ceiling_gmacs or sgemm_ceiling(a.threads)]
    print(f"# load: {os.getloadavg()}", flush=True)

    holmes = Holmes(a.exe, a.models)
    rows = []
    try:
        for W, D in configs:
            macs, dfast, dplain = holmes.cmd(f"load {W} {D}").split()[1:]
            macs = int(macs)
            print(f"# W={W} D={D}: {macs / 1e6:.1f} MMAC/window; verification input max|burn-ORT| "
                  f"fast {float(dfast):.1e}, plain {float(dplain):.1e}", flush=True)
            sess = make_session(os.path.join(a.models, f"model_{W}_{D}.onnx"), a.threads)
            for B in batches:
                x = synth_input(B)
                want = sess.run(["logits"], {"x": x})[0]
                check = {}
                for path in ("fast", "plain"):
                    d = float(np.abs(holmes.eval(path, x) - want).max())
                    check[path] = d
                    if not d < TOLERANCE:
                        raise SystemExit(f"W={W} D={D} B={B}: burn {path} differs from ORT by {d}")
                engines = {
                    "plain": lambda n, B=B: holmes.run("plain", B, n),
                    "fast": lambda n, B=B: holmes.run("fast", B, n),
                    "ort": lambda n, x=x: ort_times(sess, x, n),
                }
                engines = {k: v for k, v in engines.items() if k in wanted}
                est = {}
                for name, fn in engines.items():  # warm-up
                    est[name] = statistics.median(fn(2))
                    time.sleep(SWITCH_SLEEP)
                per_round = {n: max(math.ceil(a.min_runs / a.rounds),
                                    min(math.ceil(a.max_runs / a.rounds),
                                        math.ceil(a.target_s * 1e3 / e / a.rounds))) for n, e in est.items()}
                samples = {n: [] for n in engines}
                names = list(engines)
                for r in range(a.rounds):
                    order = names[r % len(names):] + names[:r % len(names)]
                    for name in order:
                        samples[name] += engines[name](per_round[name])
                        time.sleep(SWITCH_SLEEP)
                mac = macs * B
                row = dict(W=W, D=D, B=B, mac=mac, check=check)
                for name, s in samples.items():
                    med = statistics.median(s)
                    row[name] = dict(med=med, p10=pct(s, 0.1), p90=pct(s, 0.9), n=len(s),
                                     gmacs=mac / (med * 1e-3) / 1e9)
                rows.append(row)
                print(f"W={W:4d} D={D:3d} B={B:3d} " + " ".join(
                    f"{n}={row[n]['med']:.2f}ms(n={row[n]['n']})" for n in names)
                    + f" max|burn-ORT| fast {check['fast']:.1e} plain {check['plain']:.1e}", flush=True)
    finally:
        holmes.close()

    if not a.ceiling_gmacs:
        ceilings.append(sgemm_ceiling(a.threads))
    ceiling = statistics.mean(ceilings)
    print(f"\n# load at the end: {os.getloadavg()}; sgemm ceiling {ceiling:.1f} GMAC/s ({a.threads} threads; "
          + " and ".join(f"{c:.1f}" for c in ceilings) + " at the start and the end)")
    if "ort" not in wanted:
        return
    for path in [p for p in ("plain", "fast") if p in wanted]:
        print(f"\n## burn {path} path vs onnxruntime ({a.threads} threads), medians (p10-p90)")
        print("| W | D | batch | MMAC | burn ms | ORT ms | burn/ORT | burn GMAC/s | ORT GMAC/s "
              "| burn % of sgemm | ORT % of sgemm | max abs diff |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            b, o = r[path], r["ort"]
            print(f"| {r['W']} | {r['D']} | {r['B']} | {r['mac'] / 1e6:.1f} "
                  f"| {b['med']:.2f} ({b['p10']:.2f}-{b['p90']:.2f}) | {o['med']:.2f} ({o['p10']:.2f}-{o['p90']:.2f}) "
                  f"| {b['med'] / o['med']:.2f}x | {b['gmacs']:.1f} | {o['gmacs']:.1f} "
                  f"| {100 * b['gmacs'] / ceiling:.0f} % | {100 * o['gmacs'] / ceiling:.0f} % | {r['check'][path]:.1e} |")


if __name__ == "__main__":
    main()
