#!/usr/bin/env python3
"""Every `--option` that the documentation passes to a knnwb command exists in that command's
--help: commands in code blocks (continuation lines joined) and in inline code spans, in README.md,
docs/, plugin/README.md and share/examples/README.md.

usage: check_doc_options.py KNNWB_PROGRAM SOURCE_DIR
Prints `file:line: knnwb CMD --option: not in knnwb CMD --help` per problem; exit 1 if any.
"""
import glob
import os
import re
import subprocess
import sys

COMMANDS = ('knn', 'cluster', 'run', 'validate', 'plugins', 'metafeatures', 'neighbourhood',
            'classify', 'render')


def help_options(program, command):
    result = subprocess.run([program, command, '--help'], capture_output=True, text=True,
                            timeout=60)
    if result.returncode != 0:
        sys.exit(f'check_doc_options: {program} {command} --help exited {result.returncode}')
    return set(re.findall(r'(--[a-z][a-z0-9-]*)', result.stdout))


def commands_in(path):
    """(line number, text) of every knnwb command the file shows."""
    lines = open(path, encoding='utf-8').read().split('\n')
    found, fence, usage, joined, start = [], False, False, '', 0
    for number, line in enumerate(lines, 1):
        if line.startswith('```'):
            fence = not fence
            usage = fence and line.strip() == '```'  # a usage block: no language named
            continue
        if fence:
            # a command goes on after a trailing backslash; in a usage block, on indented lines
            if joined and (joined.endswith('\\') or (usage and line.startswith(' '))):
                joined = joined.rstrip('\\') + ' ' + line.strip()
            else:
                if joined:
                    found.append((start, joined))
                joined, start = line, number
            continue
        if joined:
            found.append((start, joined))
            joined = ''
    if joined:
        found.append((start, joined))
    # inline code spans, which may wrap across lines inside a paragraph
    text = '\n'.join(lines)
    for match in re.finditer(r'`([^`]+)`', re.sub(r'```.*?```', lambda m: '\n' * m.group(0).count('\n'), text, flags=re.S)):
        found.append((text.count('\n', 0, match.start()) + 1, match.group(1).replace('\n', ' ')))
    return found


def main():
    program, source = sys.argv[1], sys.argv[2]
    known = {command: help_options(program, command) for command in COMMANDS}
    files = [os.path.join(source, 'README.md'), os.path.join(source, 'plugin', 'README.md'),
             os.path.join(source, 'share', 'examples', 'README.md')]
    files += sorted(glob.glob(os.path.join(source, 'docs', '*.md')))
    problems, checked = [], 0
    for path in files:
        rel = os.path.relpath(path, source)
        for number, command_text in commands_in(path):
            command_text = command_text.split('#')[0] if ' #' in command_text else command_text
            for match in re.finditer(r'(?:^|[\s/])knnwb (%s)\b' % '|'.join(COMMANDS), command_text):
                command = match.group(1)
                rest = command_text[match.end():]
                # stop at the next shell command of the same line
                rest = re.split(r'&&|\|\||;|\bthen\b|\bdo\b', rest)[0]
                for option in re.findall(r'(?<![\w-])(--[a-z][a-z0-9-]*)', rest):
                    checked += 1
                    if option not in known[command]:
                        problems.append(f'{rel}:{number}: knnwb {command} {option}: not in '
                                        f'knnwb {command} --help')
    for problem in problems:
        print(problem)
    print(f'check_doc_options: {checked} options checked, {len(problems)} problem(s)')
    return 1 if problems or checked == 0 else 0


if __name__ == '__main__':
    sys.exit(main())
