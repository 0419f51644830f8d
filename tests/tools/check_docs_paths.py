#!/usr/bin/env python3
"""Check that what the documentation names exists (and that no file repeats a heading): every relative Markdown link (and its #anchor),
every repository path (core/..., tests/..., share/...), every source file named by its bare name
(select_plan.c, tile_filter.cu) and every build output named as build/tests/DIR/PROGRAM (a
target of tests/DIR/CMakeLists.txt).

usage: check_docs_paths.py [SOURCE_DIR]   (default: the repository this script lives in)
Prints one `file:line: what is missing` per problem and exits 1 if there is any.
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), '..', '..'))
TOP = ('core', 'kernels', 'formats', 'clustering', 'distributed', 'workflow', 'plugin', 'tests',
       'share', 'docs', '.ci')
# Names that the documentation uses for the user's own files, never files of the repository.
# (Names in capitals, PIPELINE.xml, OUT.tsv, are placeholders too.)
EXAMPLE_NAMES = {'prog.c', 'pipeline.xml', 'bad.tsv', 'bad.npy', 'expression.tsv', 'data.npy',
                 'expr.tsv'}
# ROBUSTNESS.md names its tests relative to tests/ (`formats/test_readers.c`).
EXTRA_BASES = {'ROBUSTNESS.md': ('tests',)}
SOURCE_EXT = ('c', 'h', 'cu', 'cuh', 'sh', 'py', 'xml', 'xsd', 'md')


def markdown_files():
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames
                       if not d.startswith('.') and d != 'build' and not d.startswith('build-')]
        for name in filenames:
            if name.endswith('.md'):
                yield os.path.join(dirpath, name)


def all_basenames():
    names = set()
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in ('.git', 'build')]
        names.update(filenames)
    return names


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace('`', '')
    text = re.sub(r'[^\w\- ]', '', text)
    return text.replace(' ', '-')


def anchors(path):
    result, fence = set(), False
    with open(path, encoding='utf-8') as f:
        for line in f:
            if line.startswith('```'):
                fence = not fence
            elif not fence and line.startswith('#'):
                result.add(slug(line.lstrip('#')))
    return result


def targets_of(tests_dir):
    """Executable targets declared in tests/<dir>/CMakeLists.txt."""
    path = os.path.join(ROOT, 'tests', tests_dir, 'CMakeLists.txt')
    if not os.path.exists(path):
        return set()
    text = open(path, encoding='utf-8').read()
    return set(re.findall(r'(?:add_executable|knnwb_add_test)\(\s*([\w-]+)', text))


def main():
    problems = []
    checked = 0
    basenames = all_basenames()
    for md in sorted(markdown_files()):
        rel = os.path.relpath(md, ROOT)
        with open(md, encoding='utf-8') as f:
            lines = f.read().split('\n')
        seen, fence = {}, False
        for number, line in enumerate(lines, 1):
            if line.startswith('```'):
                fence = not fence
            elif not fence and re.match(r'#+ ', line):
                if slug(line.lstrip('#')) in seen:
                    problems.append(f'{rel}:{number}: heading repeats line {seen[slug(line.lstrip("#"))]} '
                                    '(its link would reach the first one)')
                seen.setdefault(slug(line.lstrip('#')), number)
        for number, line in enumerate(lines, 1):
            where = f'{rel}:{number}'
            checked += len(re.findall(r'\]\(|(?:%s)/|\.(?:%s)\b' % ('|'.join(TOP), '|'.join(SOURCE_EXT)), line))
            for target in re.findall(r'\]\(([^)\s]+)\)', line):
                if re.match(r'[a-z]+:', target):
                    continue
                file_part, _, anchor = target.partition('#')
                path = os.path.normpath(os.path.join(os.path.dirname(md), file_part)) if file_part else md
                if not os.path.exists(path):
                    problems.append(f'{where}: link to {target}: no such file')
                elif anchor and path.endswith('.md') and anchor not in anchors(path):
                    problems.append(f'{where}: link to {target}: no heading with that anchor')
            for match in re.finditer(r'(?<![\w./$-])((?:%s)/[\w./+-]*)' % '|'.join(map(re.escape, TOP)), line):
                path = match.group(1).rstrip('.')
                bases = ('',) + EXTRA_BASES.get(rel, ())
                if not any(os.path.exists(os.path.join(ROOT, base, path)) for base in bases):
                    problems.append(f'{where}: {path}: no such file or folder')
            for match in re.finditer(r'(?<![\w$])(?:build|BUILD)/tests/([\w]+)/([\w-]+)', line):
                if match.group(2) not in targets_of(match.group(1)):
                    problems.append(f'{where}: {match.group(0)}: no such program in '
                                    f'tests/{match.group(1)}/CMakeLists.txt')
            for match in re.finditer(r'(?<![\w./$<-])([\w-]+\.(?:%s))(?![\w])' % '|'.join(SOURCE_EXT), line):
                name = match.group(1)
                if name not in basenames and name not in EXAMPLE_NAMES and not name.split('.')[0].isupper():
                    problems.append(f'{where}: {name}: no file of that name in the repository')
    for problem in problems:
        print(problem)
    print(f'check_docs_paths: {checked} names checked, {len(problems)} problem(s)')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
