#!/usr/bin/env python3
"""Writes a float32 .npy matrix of Gaussian values without numpy (CI may lack it).
Usage: make_npy.py PATH ROWS COLS SEED [NAN_ROW]
Rows 5 and 100 (when they exist) copy row 9, so exact ties are part of every check."""
import random
import struct
import sys


def main():
    path, rows, cols, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    nan_row = int(sys.argv[5]) if len(sys.argv) > 5 else None
    rng = random.Random(seed)
    data = [[rng.gauss(0.0, 1.0) for _ in range(cols)] for _ in range(rows)]
    for copy in (5, 100):
        if copy < rows and rows > 9:
            data[copy] = list(data[9])
    if nan_row is not None:
        data[nan_row][min(2, cols - 1)] = float("nan")
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
    header += " " * (64 - (10 + len(header) + 1) % 64) + "\n"
    with open(path, "wb") as out:
        out.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        for row in data:
            out.write(struct.pack("<%df" % cols, *row))


if __name__ == "__main__":
    main()
