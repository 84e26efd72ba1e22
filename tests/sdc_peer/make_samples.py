#!/usr/bin/env python3
"""Write a synthetic two-lead ECG sample file for tests/sdc_peer/provider.py.

Output format (what provider.py --samples reads):
    {"hz": 500, "II": [mV, ...], "V": [mV, ...]}

The signal is a sum of Gaussian P/Q/R/S/T bumps at a fixed heart rate, so a
loop of it is seamless when the duration is a whole number of beats.

    python3 tests/sdc_peer/make_samples.py --hz 500 --seconds 10 --bpm 72 --out /tmp/ecg500.json
"""

from __future__ import annotations

import argparse
import json
import math

# (centre as fraction of the RR interval, width in s, amplitude in mV) per wave
LEAD_II = [(0.10, 0.025, 0.15), (0.245, 0.010, -0.10), (0.27, 0.012, 1.20),
           (0.295, 0.010, -0.25), (0.55, 0.045, 0.30)]
LEAD_V = [(0.10, 0.025, 0.10), (0.245, 0.010, -0.05), (0.27, 0.012, 0.60),
          (0.30, 0.014, -0.90), (0.55, 0.045, 0.45)]


def beat(waves: list[tuple[float, float, float]], t: float, rr: float) -> float:
    v = 0.0
    for centre, width, amp in waves:
        # sum over neighbouring beats so wave tails wrap seamlessly
        for k in (-1, 0, 1):
            d = t - (centre * rr + k * rr)
            v += amp * math.exp(-0.5 * (d / width) ** 2)
    return v


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--hz', type=int, default=500, choices=(250, 500))
    ap.add_argument('--seconds', type=float, default=10.0)
    ap.add_argument('--bpm', type=float, default=72.0)
    ap.add_argument('--out', required=True)
    args = ap.parse_args()

    rr = 60.0 / args.bpm
    beats = max(1, round(args.seconds / rr))  # whole beats => seamless loop
    n = round(beats * rr * args.hz)
    ii, v = [], []
    for i in range(n):
        t = (i / args.hz) % rr
        ii.append(round(beat(LEAD_II, t, rr), 3))
        v.append(round(beat(LEAD_V, t, rr), 3))
    with open(args.out, 'w') as f:
        json.dump({'hz': args.hz, 'II': ii, 'V': v}, f)
    print(f'wrote {n} samples per lead ({n / args.hz:.2f} s, {beats} beats) to {args.out}')


if __name__ == '__main__':
    main()
