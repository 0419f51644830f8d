#!/usr/bin/env python3
"""Where two `.knn` files of one input part, and how.

Usage: knn_diff.py REF.knn OTHER.knn [ROWS]

Both files come from `knnwb knn -o X.knn` on the same input. For each row whose list differs, the
difference is classed by comparing distances rank by rank: "order" (the same neighbours and
distances, listed in another order), "tie" (the same distances, another neighbour at equal
distance: the lower-index rule broken), "worse" (OTHER has a larger distance at some rank: it
missed a nearer row) or "better" (REF missed one). Prints the counts, then the first ROWS (5)
differing rows side by side. Exits 0 when the files hold the same lists, 1 otherwise.
"""
import sys


def rows(path):
    """Yields (source, [(distance, target), ...]) in file order."""
    with open(path) as f:
        f.readline()
        cur, lst = None, []
        for line in f:
            s, t, dist = line.split()
            s = int(s)
            if s != cur and cur is not None:
                yield cur, lst
                lst = []
            cur = s
            lst.append((float(dist), int(t)))
        if cur is not None:
            yield cur, lst


def classify(a, b):
    if a == b:
        return None
    if sorted(a) == sorted(b):
        return "order"
    da, db = [d for d, _ in a], [d for d, _ in b]
    if len(da) == len(db) and da == db:
        return "tie"
    for x, y in zip(sorted(da), sorted(db)):
        if y > x:
            return "worse"
        if x > y:
            return "better"
    return "length"


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    show = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    counts, shown, total = {}, 0, 0
    a_rows, b_rows = dict(rows(sys.argv[1])), dict(rows(sys.argv[2]))
    for s in sorted(set(a_rows) | set(b_rows)):
        a, b = a_rows.get(s, []), b_rows.get(s, [])
        kind = classify(a, b)
        total += 1
        if kind is None:
            continue
        counts[kind] = counts.get(kind, 0) + 1
        if shown < show:
            shown += 1
            print(f"row {s} ({kind}):")
            for i in range(max(len(a), len(b))):
                x = a[i] if i < len(a) else ("-", "-")
                y = b[i] if i < len(b) else ("-", "-")
                mark = "" if x == y else "  <>"
                print(f"  {i:3d}  {x[1]:>9} {x[0]!s:<22} {y[1]:>9} {y[0]!s:<22}{mark}")
    differing = sum(counts.values())
    print(f"{differing} of {total} rows differ: " +
          (", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "none"))
    sys.exit(1 if differing else 0)


if __name__ == "__main__":
    main()
