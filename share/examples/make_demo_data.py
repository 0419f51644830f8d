#!/usr/bin/env python3
"""Writes demo-expression.txt: a small synthetic microarray in the seed's CIBM format.

240 probes x 24 samples in 6 co-expression modules of 40 probes (each probe is its module's
profile times a random gain plus noise), and one "dummy probe" row, YearsToRelapse, that follows
module 3 as the seed paper's clinical phenotype row does. Deterministic (seed 20120521).
"""
import random

rng = random.Random(20120521)
n_samples, n_modules, per_module = 24, 6, 40
profiles = [[rng.gauss(0, 1) for _ in range(n_samples)] for _ in range(n_modules)]
rows = []
for m in range(n_modules):
    for j in range(per_module):
        gain = rng.uniform(0.5, 2.0)
        values = [8 + gain * profiles[m][s] + rng.gauss(0, 0.6) for s in range(n_samples)]
        rows.append((f"M{m + 1}_P{j + 1:02d}", values))
rows.append(("YearsToRelapse", [5 + 2 * profiles[2][s] + rng.gauss(0, 0.3) for s in range(n_samples)]))
classes = [s % 2 for s in range(n_samples)]
with open("demo-expression.txt", "w") as out:
    out.write("<MicroarrayData>\n")
    out.write(f"{len(rows)}\t{n_samples}\n")
    for label, values in rows:
        out.write(label + "\t" + "\t".join(f"{v:.4f}" for v in values) + "\n")
    out.write("<SamplesNames>\n\t" + "\t".join(f"S{s + 1}" for s in range(n_samples)) + "\n")
    out.write("<SamplesClasses>\n\t" + "\t".join(str(c) for c in classes) + "\n")
    out.write("<EndOfFile>\n")
