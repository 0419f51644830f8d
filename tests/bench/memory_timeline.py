#!/usr/bin/env python3
"""Memory of every knnwb process of a command, over time (Linux /proc).

Usage: memory_timeline.py OUT COMMAND...

Runs COMMAND (for example `mpirun -np 2 build/bin/knnwb knn X.npy ...`) and samples, every 20 ms,
the resident set (VmRSS) and the proportional set (Pss: pages shared between processes, such as an
MPI shared-memory window, counted once over their sharers) of each process named knnwb that
COMMAND started. Writes
OUT (time, pid, RSS kB, PSS kB), OUT.log (COMMAND's standard error, each line with its time, to
place the peaks among knnwb's debug lines) and OUT.smaps (each process's mappings of 8 MB or more
near its peak, to name what holds the memory), and prints the wall time and each process's peak
RSS/PSS in GB. Exits with COMMAND's status. Reading smaps costs a few milliseconds a sample; the
timings it prints are the command's as the user runs it, give or take that.
"""
import os
import subprocess
import sys
import threading
import time


def field_kb(path, key):
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def large_mappings(pid, at):
    """The mappings of 8 MB or more resident: 'RSS PSS name' in MB."""
    out = ['t=%.3f' % at]
    name, rss = '[anon]', 0
    try:
        with open(f'/proc/{pid}/smaps') as f:
            for line in f:
                words = line.split()
                if not words[0].endswith(':'):
                    name = ' '.join(words[5:]) if len(words) > 5 else '[anon]'
                elif words[0] == 'Rss:':
                    rss = int(words[1])
                elif words[0] == 'Pss:' and rss >= 8000:
                    out.append('%8d %8d %s' % (rss // 1000, int(words[1]) // 1000, name))
    except OSError:
        pass
    return '\n'.join(out)


def parent(pid):
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[1]  # the field after the state
    except (OSError, IndexError):
        return None


def knnwb_pids(root):
    """The processes named knnwb that descend from root (not other commands' on the machine)."""
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        try:
            with open(f'/proc/{pid}/comm') as f:
                if f.read().strip() != 'knnwb':
                    continue
        except OSError:
            continue
        up, hops = pid, 0
        while up not in (None, '0', '1') and up != root and hops < 64:
            up, hops = parent(up), hops + 1
        if up == root:
            yield pid


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, command = sys.argv[1], sys.argv[2:]
    start = time.time()
    child = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, errors='replace')
    lines = []

    def pump():
        for line in child.stderr:
            lines.append('%.3f\t%s' % (time.time() - start, line.rstrip()))

    reader = threading.Thread(target=pump)
    reader.start()
    peaks, samples, snapshots = {}, [], {}
    while child.poll() is None:
        at = time.time() - start
        for pid in knnwb_pids(str(child.pid)):
            rss = field_kb(f'/proc/{pid}/status', 'VmRSS:')
            pss = field_kb(f'/proc/{pid}/smaps_rollup', 'Pss:')
            if rss is None or pss is None:
                continue
            peak = peaks.setdefault(pid, [0, 0])
            peak[0], peak[1] = max(peak[0], rss), max(peak[1], pss)
            if rss > snapshots.get(pid, (0, ''))[0] + 30000:
                snapshots[pid] = (rss, large_mappings(pid, at))
            samples.append('%.3f\t%s\t%d\t%d' % (at, pid, rss, pss))
        time.sleep(0.02)
    wall = time.time() - start
    reader.join()
    with open(out, 'w') as f:
        f.write('\n'.join(samples) + '\n')
    with open(out + '.log', 'w') as f:
        f.write('\n'.join(lines) + '\n')
    with open(out + '.smaps', 'w') as f:
        for pid, (rss, text) in snapshots.items():
            f.write('pid %s, RSS %d MB\n%s\n' % (pid, rss // 1000, text))
    print('wall %.2f s, status %d; peak RSS/PSS (GB) per process: %s' % (
        wall, child.returncode,
        ' '.join('%.2f/%.2f' % (r / 1e6, p / 1e6) for r, p in sorted(peaks.values(), reverse=True))))
    sys.exit(child.returncode)


if __name__ == '__main__':
    main()
