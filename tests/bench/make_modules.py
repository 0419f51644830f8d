#!/usr/bin/env python3
"""Writes a float32 .npy of planted co-expression modules shaped like the ALL leukaemia set
(12,625 probes x 128 samples by default) for the writer, layout and render benchmarks.

    python3 tests/bench/make_modules.py OUT.npy [--rows 12625] [--cols 128] [--modules 48]
                                        [--background 0.3] [--seed 13]

Each module follows a random profile over the samples with per-probe strength and Gaussian noise;
a fraction of the probes (--background) are noise only. Module ids go to OUT's `.modules.txt`.
"""
import argparse

import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("--rows", type=int, default=12625)
parser.add_argument("--cols", type=int, default=128)
parser.add_argument("--modules", type=int, default=48)
parser.add_argument("--background", type=float, default=0.3)
parser.add_argument("--seed", type=int, default=13)
args = parser.parse_args()
rng = np.random.default_rng(args.seed)
profiles = rng.standard_normal((args.modules, args.cols))
module = rng.integers(0, args.modules, args.rows)
module[rng.random(args.rows) < args.background] = -1
strength = rng.uniform(0.8, 2.5, args.rows)
values = 8.0 + rng.standard_normal((args.rows, args.cols))
planted = module >= 0
values[planted] += strength[planted, None] * profiles[module[planted]]
np.save(args.out, values.astype(np.float32))
np.savetxt(args.out[:-4] + ".modules.txt", module, fmt="%d")
