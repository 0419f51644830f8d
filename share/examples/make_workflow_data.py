#!/usr/bin/env python3
"""Writes the inputs of the seed-workflow examples from the synthetic set (standard library only).

    python3 share/examples/make_workflow_data.py [--data-dir share/examples/data]

Reads synthetic_expression.tsv and synthetic_modules.tsv (share/make_example_data.py) and writes:
  synthetic_clinical.tsv    one line per sample: `sample<TAB>YearsToRelapse<TAB>Group<TAB>Response`
                            YearsToRelapse follows module M04 (the mean of its probes, scaled to
                            1-10 years, plus a little deterministic noise); Group is the sample
                            group the generator shifts modules by (G1-G4: samples in four equal
                            blocks); Response is categorical (responder / non-responder).
  synthetic_pair_rows.txt   the rows whose pairs the metafeature example forms: the M04 probes and
                            the first 27 background probes (120 rows -> 7,140 pairs per operator).
Deterministic: no random numbers beyond a fixed sine-based jitter.
"""
import argparse
import math
import os


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--data-dir", default=os.path.join(here, "data"))
    args = parser.parse_args()
    expression = os.path.join(args.data_dir, "synthetic_expression.tsv")
    modules = os.path.join(args.data_dir, "synthetic_modules.tsv")
    with open(expression) as f:
        header = f.readline().rstrip("\n").split("\t")
        rows = {}
        for line in f:
            fields = line.rstrip("\n").split("\t")
            rows[fields[0]] = [float(v) for v in fields[1:]]
    samples = header[1:]
    module_of = {}
    with open(modules) as f:
        f.readline()
        for line in f:
            probe, module = line.rstrip("\n").split("\t")
            module_of[probe] = module
    m04 = [p for p in rows if module_of.get(p) == "M04"]
    background = [p for p in rows if module_of.get(p) == "none"][:27]
    n = len(samples)
    profile = [sum(rows[p][s] for p in m04) / len(m04) for s in range(n)]
    lo, hi = min(profile), max(profile)
    years = [1.0 + 9.0 * (x - lo) / (hi - lo) + 0.3 * math.sin(7.0 * s) for s, x in enumerate(profile)]
    with open(os.path.join(args.data_dir, "synthetic_clinical.tsv"), "w", newline="\n") as out:
        out.write("sample\tYearsToRelapse\tGroup\tResponse\n")
        for s, name in enumerate(samples):
            group = f"G{s * 4 // n + 1}"
            response = "responder" if years[s] > 5.0 else "non-responder"
            out.write(f"{name}\t{years[s]:.2f}\t{group}\t{response}\n")
    with open(os.path.join(args.data_dir, "synthetic_pair_rows.txt"), "w", newline="\n") as out:
        for p in m04 + background:
            out.write(p + "\n")
    print(f"wrote synthetic_clinical.tsv ({n} samples) and synthetic_pair_rows.txt "
          f"({len(m04) + len(background)} rows)")


if __name__ == "__main__":
    main()
