#!/usr/bin/env python3
"""The fixed parts of one traced `knnwb knn` run, from its log (G_MESSAGES_DEBUG=all
KNNWB_CUDA_TRACE=1) and, when given, the shell's clock around it: the process's start (to
"command started"), the partition's choice, the wait for the GPUs' start, each worker's setup and
upload, tile loop and lists out, the cleanup between knnwb's summary and "command finished", and
the process's end after it (of which the wait for the GPUs given back). One line.
Usage: phases.py LOG [T0 T1]   (T0, T1: the shell's `date +%s.%N` before and after the run)"""
import datetime
import re
import sys


def clock(text, what):
    """Seconds since midnight of the debug line that ends with `what`, or None."""
    m = re.search(r"(\d\d):(\d\d):(\d\d\.\d+): knnwb: " + what, text)
    return int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3)) if m else None


def of_day(epoch):
    t = datetime.datetime.fromtimestamp(epoch)
    return t.hour * 3600 + t.minute * 60 + t.second + t.microsecond / 1e6


def main():
    text = open(sys.argv[1], errors="replace").read()
    parts = []
    started, finished = clock(text, "command started"), clock(text, "command finished")
    if len(sys.argv) == 4 and started is not None and finished is not None:
        t0, t1 = float(sys.argv[2]), float(sys.argv[3])
        parts.append("start %.3f" % (started - of_day(t0)))
    m = re.search(r"partition: (?:not used in|.* in) ([0-9.]+) s", text)
    if m:
        parts.append("partition %s" % m.group(1))
    m = re.search(r"of which ([0-9.]+) s waiting for the tile GEMM's choice", text)
    if m:
        parts.append("GPU start wait %s" % m.group(1))
    for w, up, done, out in re.findall(
            r"worker (\d+) timeline \(s from the start\): set up [0-9.]+, uploaded ([0-9.]+),.*?"
            r"tiles done ([0-9.]+), lists out ([0-9.]+)", text):
        parts.append("GPU %s: up %.3f loop %.3f out %.3f" %
                     (w, float(up), float(done) - float(up), float(out) - float(done)))
    m = re.search(r"select and refine ([0-9.]+) s", text)
    if m:
        parts.append("select+refine %s" % m.group(1))
    m = re.search(r"^knnwb: .*total ([0-9.]+) s\)$", text, re.M)
    if m and started is not None and finished is not None:
        parts.append("cleanup %.3f" % (finished - started - float(m.group(1))))
    given = clock(text, "the GPUs given back")
    if given is not None and finished is not None:
        parts.append("release wait %.3f" % (given - finished))
    if len(sys.argv) == 4 and finished is not None:
        parts.append("end %.3f" % (of_day(t0) + (t1 - t0) - finished))
    print("; ".join(parts))


if __name__ == "__main__":
    main()
