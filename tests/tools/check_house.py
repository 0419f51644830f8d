#!/usr/bin/env python3
"""The house rules that can be read off the sources, checked on every test run.

1. A private header (a name ending in `_internal.h`) is read only by files in its own folder
   (tests may read any).
2. No function outside tests/ is over 200 lines, and at most five are over 120 (the long CUDA
   kernels and their host loops in kernels/ are the expected ones).
3. Every igraph initialisation outside tests/ is checked: its status goes to IGRAPH_CHECK,
   knnwb_error_from_igraph, a variable, a condition or a return.

Usage: check_house.py SOURCE_DIR. Prints one line per problem and exits 1 when there is any.
"""
import os
import re
import sys

LONG, TOO_LONG, ALLOWED_LONG = 120, 200, 5
SOURCE_SUFFIXES = ('.c', '.h', '.cu', '.cuh')
SKIP_TOP = {'tests', 'build', '.git', '.gpu'}


def source_files(root):
    for top in sorted(os.listdir(root)):
        # Hidden folders (.git, .gpu, a .venv of the Python package's users) hold no sources of ours.
        if top in SKIP_TOP or top.startswith(('build', '.')) or \
                not os.path.isdir(os.path.join(root, top)):
            continue
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(SOURCE_SUFFIXES):
                    yield os.path.join(folder, name)


def private_headers(root, files):
    """Problems: a *_internal.h read from another folder."""
    where = {}
    for path in files:
        if path.endswith('_internal.h'):
            where.setdefault(os.path.basename(path), []).append(os.path.dirname(path))
    problems = []
    include = re.compile(r'^\s*#\s*include\s+"([^"]+_internal\.h)"', re.M)
    for path in files:
        with open(path, encoding='utf-8', errors='replace') as f:
            text = f.read()
        for match in include.finditer(text):
            name = match.group(1)
            here = os.path.dirname(path)
            beside = os.path.normpath(os.path.join(here, name))
            folders = [os.path.dirname(beside)] if os.path.exists(beside) else \
                where.get(os.path.basename(name), [])
            if folders and here not in folders:
                line = text.count('\n', 0, match.start()) + 1
                problems.append('%s:%d: reads %s, private to %s/' % (
                    os.path.relpath(path, root), line, name,
                    ', '.join(os.path.relpath(f, root) for f in folders)))
    return problems


def function_lengths(path):
    """(name, first line, lines) of each function definition: a line that opens a body with '{'
    in column 0 after a signature, up to the '}' in column 0 (the house style, clang-format)."""
    with open(path, encoding='utf-8', errors='replace') as f:
        lines = f.read().split('\n')
    out = []
    i = 0
    while i < len(lines):
        if lines[i].startswith('{') and i > 0:
            j = i - 1
            while j > 0 and lines[j].strip() and not re.match(r'^[A-Za-z_]', lines[j]):
                j -= 1
            match = re.search(r'([A-Za-z_][A-Za-z_0-9:]*)\s*\(', ' '.join(lines[j:i]))
            end = i + 1
            while end < len(lines) and not lines[end].startswith('}'):
                end += 1
            if match:
                out.append((match.group(1), j + 1, end - j + 1))
            i = end
        i += 1
    return out


def long_functions(root, files):
    problems, long_ones = [], []
    for path in files:
        if not path.endswith(('.c', '.cu')):
            continue
        for name, line, length in function_lengths(path):
            where = '%s:%d: %s' % (os.path.relpath(path, root), line, name)
            if length > TOO_LONG:
                problems.append('%s is %d lines (at most %d)' % (where, length, TOO_LONG))
            elif length > LONG:
                long_ones.append('%s is %d lines' % (where, length))
    if len(long_ones) > ALLOWED_LONG:
        problems.append('%d functions over %d lines (at most %d):' % (len(long_ones), LONG,
                                                                      ALLOWED_LONG))
        problems.extend('  ' + item for item in long_ones)
    return problems, long_ones


def unchecked_igraph_inits(root, files):
    problems = []
    call = re.compile(r'\bigraph_[a-z_]*init[a-z_]*\s*\(')
    for path in files:
        if not path.endswith(('.c', '.cu')):
            continue
        with open(path, encoding='utf-8', errors='replace') as f:
            lines = f.read().split('\n')
        for number, text in enumerate(lines, 1):
            match = call.search(text)
            if not match or text.lstrip().startswith(('*', '/*', '//')):
                continue
            before = text[:match.start()]
            if before.strip() == '':
                # The call starts the statement: its status is dropped unless the line before
                # opened a checking construct that continues here.
                previous = lines[number - 2].rstrip() if number > 1 else ''
                if previous.endswith(('(', ',', '=', '&&', '||', 'return')):
                    continue
                problems.append('%s:%d: %s: the status of an igraph initialisation is not '
                                'checked' % (os.path.relpath(path, root), number,
                                             match.group(0).rstrip('( ')))
    return problems


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else '.')
    files = list(source_files(root))
    problems = private_headers(root, files)
    length_problems, long_ones = long_functions(root, files)
    problems += length_problems
    problems += unchecked_igraph_inits(root, files)
    for problem in problems:
        print(problem)
    print('check_house: %d files; %d functions over %d lines (at most %d allowed); %d problem(s)'
          % (len(files), len(long_ones), LONG, ALLOWED_LONG, len(problems)))
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
