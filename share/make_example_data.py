#!/usr/bin/env python3
"""Writes knnwb's synthetic expression example, deterministically (standard library only).

    python3 share/make_example_data.py [--out-dir share/examples/data] [--probes 5000]
                                       [--samples 100] [--constant-rows 0] [--seed 2012]

A microarray-like matrix: probes are rows (the points), samples columns. Ten co-expression modules
of 40-400 probes follow a hidden per-module profile over the samples (some probes anti-correlated),
on top of a probe baseline (log2 scale, 4-12) and Gaussian noise; the other probes are noise
around their baseline. The samples fall in four groups that shift some modules, as conditions
do. A phenotype row ("dummy probe" in the GPU-FS-kNN paper) follows module M01, so its nearest
neighbours are that module's probes. No missing values; --constant-rows adds zero-variance rows
(Pearson rejects them unless told to drop them) for tests.

Files written:
  synthetic_expression.tsv   header `probe<TAB>S001...`, one row per probe, 3 decimals
  synthetic_modules.tsv      `probe<TAB>module` (module "none" for background probes)
The random numbers come from a SplitMix64 generator so the output is identical on every Python.
"""
import argparse
import math
import os


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & 0xFFFFFFFFFFFFFFFF
        self.spare = None

    def next_u64(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        return z ^ (z >> 31)

    def uniform(self, lo=0.0, hi=1.0):
        return lo + (hi - lo) * ((self.next_u64() >> 11) / float(1 << 53))

    def integer(self, lo, hi):  # inclusive
        return lo + self.next_u64() % (hi - lo + 1)

    def gauss(self):
        if self.spare is not None:
            value, self.spare = self.spare, None
            return value
        u1 = max(self.uniform(), 1e-300)
        u2 = self.uniform()
        radius = math.sqrt(-2.0 * math.log(u1))
        self.spare = radius * math.sin(2.0 * math.pi * u2)
        return radius * math.cos(2.0 * math.pi * u2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--out-dir", default=os.path.join(here, "examples", "data"))
    parser.add_argument("--probes", type=int, default=5000)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--modules", type=int, default=10)
    parser.add_argument("--constant-rows", type=int, default=0)
    parser.add_argument("--seed", type=int, default=2012)
    args = parser.parse_args()

    rng = SplitMix64(args.seed)
    n_samples = args.samples
    groups = [s * 4 // n_samples for s in range(n_samples)]
    sample_names = [f"S{s + 1:03d}" for s in range(n_samples)]

    # Module profiles: a smooth group effect plus per-sample variation, standardised.
    profiles = []
    for _ in range(args.modules):
        shift = [rng.gauss() * 1.5 for _ in range(4)]
        raw = [shift[groups[s]] + rng.gauss() for s in range(n_samples)]
        mean = sum(raw) / n_samples
        sd = math.sqrt(sum((x - mean) ** 2 for x in raw) / n_samples) or 1.0
        profiles.append([(x - mean) / sd for x in raw])

    sizes = [rng.integer(40, 400) for _ in range(args.modules)]
    n_probes = args.probes
    if sum(sizes) > n_probes // 2:
        scale = (n_probes // 2) / sum(sizes)
        sizes = [max(5, int(size * scale)) for size in sizes]
    module_of = ["none"] * n_probes
    order = list(range(n_probes))
    for i in range(n_probes - 1, 0, -1):  # Fisher-Yates: modules are scattered over the file
        j = rng.integer(0, i)
        order[i], order[j] = order[j], order[i]
    cursor = 0
    for m, size in enumerate(sizes):
        for probe in order[cursor:cursor + size]:
            module_of[probe] = m
        cursor += size

    os.makedirs(args.out_dir, exist_ok=True)
    expression = os.path.join(args.out_dir, "synthetic_expression.tsv")
    modules = os.path.join(args.out_dir, "synthetic_modules.tsv")
    with open(expression, "w", newline="\n") as out, open(modules, "w", newline="\n") as truth:
        out.write("probe\t" + "\t".join(sample_names) + "\n")
        truth.write("probe\tmodule\n")
        for p in range(n_probes):
            name = f"PRB{p + 1:05d}"
            baseline = rng.uniform(4.0, 12.0)
            m = module_of[p]
            if m == "none":
                noise = rng.uniform(0.2, 0.8)
                values = [baseline + noise * rng.gauss() for _ in range(n_samples)]
                truth.write(f"{name}\tnone\n")
            else:
                loading = rng.uniform(0.6, 2.0) * (-1.0 if rng.uniform() < 0.15 else 1.0)
                noise = rng.uniform(0.4, 1.0)
                values = [baseline + loading * profiles[m][s] + noise * rng.gauss()
                          for s in range(n_samples)]
                truth.write(f"{name}\tM{m + 1:02d}\n")
            out.write(name + "\t" + "\t".join(f"{v:.3f}" for v in values) + "\n")
        for c in range(args.constant_rows):
            level = 6.0 + c
            out.write(f"CONST{c + 1:02d}\t" + "\t".join(f"{level:.3f}" for _ in range(n_samples)) + "\n")
            truth.write(f"CONST{c + 1:02d}\tconstant\n")
        # The phenotype row follows module M01 (years to relapse, say), plus a little noise.
        values = [5.0 + 2.0 * profiles[0][s] + 0.3 * rng.gauss() for s in range(n_samples)]
        out.write("phenotype\t" + "\t".join(f"{v:.3f}" for v in values) + "\n")
        truth.write("phenotype\tM01\n")
    print(f"wrote {expression} ({n_probes + args.constant_rows + 1} rows x {n_samples} samples) "
          f"and {modules}")


if __name__ == "__main__":
    main()
