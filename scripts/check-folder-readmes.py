#!/usr/bin/env python3
"""Every folder has a README (issue 11).

Checks that every folder of lib/, runtime/, tools/, include/ and test/ has a
README.md of at least one paragraph that says what lives there and what it
may depend on (a line with "depend"). Folders of test inputs and data (a
path component named Inputs, data, fixtures or layers below the first) are
covered by the README of the folder that holds them, which must exist.

Usage: check-folder-readmes.py ROOT
Exit status: 0 when every folder has its README, 1 otherwise (one line per
missing or incomplete README).
"""

import os
import sys

TREES = ('lib', 'runtime', 'tools', 'include', 'test')
DATA = {'Inputs', 'data', 'fixtures', 'layers'}


def covering_readme(root, rel):
    """The README.md that must describe folder `rel`."""
    parts = rel.split(os.sep)
    for i, p in enumerate(parts[1:], start=1):
        if p in DATA:
            return os.path.join(root, *parts[:i + 1], 'README.md')
    return os.path.join(root, rel, 'README.md')


def problem(path):
    if not os.path.isfile(path):
        return 'no README.md'
    with open(path, encoding='utf-8') as f:
        text = f.read()
    paragraphs = [p for p in text.split('\n\n')
                  if p.strip() and not p.lstrip().startswith('#')]
    if not paragraphs:
        return 'README.md has no paragraph'
    if 'depend' not in text.lower():
        return 'README.md does not say what the folder may depend on'
    return None


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = sys.argv[1]
    errors = set()
    for tree in TREES:
        for dirpath, dirnames, _ in os.walk(os.path.join(root, tree)):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith('.'))
            rel = os.path.relpath(dirpath, root)
            readme = covering_readme(root, rel)
            msg = problem(readme)
            if msg:
                errors.add('error: %s: %s' % (os.path.relpath(
                    os.path.dirname(readme), root), msg))
    for e in sorted(errors):
        print(e)
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
