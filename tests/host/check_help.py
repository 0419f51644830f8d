#!/usr/bin/env python3
"""Every command's --help reads the same way in any locale: the usage line says "[OPTION...]",
no line is longer than 80 columns, options sit in the same sections in the same order in every
command (Input, Sample annotations, Search, Clustering, Output, Performance, Pipeline, Other),
each option once, an example per command, and only --seed, --quiet, --brief and --help under "Other" (a new option must be
given its place in plugin/host/commands/help.c). Usage: check_help.py KNNWB_PROGRAM"""
import os
import re
import subprocess
import sys

SECTIONS = ["Input", "Sample annotations", "Search", "Clustering", "Output", "Performance",
            "Pipeline", "Other"]
COMMANDS = ["knn", "cluster", "classify", "metafeatures", "neighbourhood", "render", "run",
            "validate", "plugins"]
OTHER_ALLOWED = {"seed", "quiet", "brief", "help"}


def sections_of(text, where):
    """{section: [option names in order]} and the order of the sections."""
    found, order, current = {}, [], None
    for line in text.split("\n"):
        heading = re.fullmatch(r"([A-Z][a-z ]+):", line)
        if heading and heading.group(1) in SECTIONS:
            current = heading.group(1)
            assert current not in found, f"{where}: section {current} twice"
            found[current], _ = [], order.append(current)
        elif current and re.match(r"  -", line):
            name = re.search(r"--([a-z0-9-]+)", line)
            assert name, f"{where}: an option line without a long name: {line!r}"
            found[current].append(name.group(1))
        elif line == "":
            current = None
    return found, order


def main():
    program = sys.argv[1]
    failures = []
    positions = {}  # option -> (command, index in the global listing) per command
    for locale in ["C", "C.UTF-8"]:
        env = dict(os.environ, LANG=locale, LC_ALL=locale)
        for command in COMMANDS:
            where = f"knnwb {command} --help (LANG={locale})"
            run = subprocess.run([program, command, "--help"], env=env, capture_output=True,
                                 timeout=60)
            text = run.stdout.decode("utf-8")
            if run.returncode != 0:
                failures.append(f"{where}: exit {run.returncode}")
                continue
            if command != "plugins" and "\nExample" not in text:
                failures.append(f"{where}: no example")
            if "dummy probe" in text or "GPU-FS-kNN format" in text:
                failures.append(f"{where}: the seed papers' jargon without a word of explanation")
            if f"knnwb {command} [OPTION...]" not in text:
                failures.append(f"{where}: no usage line 'knnwb {command} [OPTION...]'")
            for number, line in enumerate(text.split("\n"), 1):
                if len(line) > 80:
                    failures.append(f"{where}:{number}: {len(line)} columns: {line}")
            found, order = sections_of(text, where)
            if order != sorted(order, key=SECTIONS.index):
                failures.append(f"{where}: sections in the order {order}")
            listing = [o for s in order for o in found[s]]
            if len(listing) != len(set(listing)):
                failures.append(f"{where}: an option listed twice: {listing}")
            for name in found.get("Other", []):
                if name not in OTHER_ALLOWED:
                    failures.append(f"{where}: --{name} has no section (plugin/host/commands/help.c)")
            if command != "render":  # render's --labels and --edges mean other things
                positions[command] = listing
    # The same relative order everywhere: two options both commands list come in the same order.
    commands = sorted(positions)
    for a in commands:
        for b in commands:
            shared = [o for o in positions[a] if o in positions[b]]
            if shared != [o for o in positions[b] if o in positions[a]]:
                failures.append(f"{a} and {b} list their shared options in different orders")
    for failure in failures:
        print("FAIL:", failure)
    if failures:
        sys.exit(1)
    print(f"help of {len(COMMANDS)} commands laid out alike in both locales")


if __name__ == "__main__":
    main()
