#!/usr/bin/env python3
"""Size limits of the compiler and runtime sources (issue 11).

Checks every C/C++ source under lib/ and runtime/ (and tools/bt-run/bt-run.cpp):
  - a file has at most 900 lines (the dialect's op-definition files aside:
    lib/Dialect/**/*Ops.cpp and generated .inc files);
  - a function body has at most 150 lines (from the line of its opening
    brace to the line of its closing brace);
  - tools/bt-run/bt-run.cpp has at most 400 lines.

Functions are found by a brace-matching scan with comments, string and
character literals (raw strings included) blanked out: a `{` at a depth
where only namespaces, classes, structs, unions, enums and `extern "C"`
blocks are open starts a function body when the text before it (back to the
previous `;`, `{` or `}`) has a `)` and is not a class/struct/enum/namespace
head or an initializer (`=` before the parenthesis). Lambdas and local
classes count as part of their function. The scan is a heuristic that is
right on this code base; `--list` prints what it found.

Usage: check-sizes.py [--list] [--allow FILE] ROOT
  ROOT      the repository root.
  --allow   a file of known offenders, one `path` (file length) or
            `path:function` (function length) per line, `#` comments: they
            are reported as known, not as errors. An entry that is no longer
            an offender is an error too, so the list only shrinks.
Exit status: 0 when every limit holds (known offenders aside), 1 otherwise.
"""

import argparse
import os
import re
import sys

FILE_LIMIT = 900
FUNCTION_LIMIT = 150
BTRUN_LIMIT = 400
SOURCE_EXT = ('.c', '.cc', '.cpp', '.h', '.cu')


def blank_literals(text):
    """Replaces comments and string/char literals by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i))
            i = j
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        elif c == 'R' and text.startswith('"', i + 1) and \
                (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_')):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = ')' + m.group(1) + '"'
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        elif c in '"\'':
            # A digit separator (1'000) is not a character literal.
            if c == "'" and i > 0 and text[i - 1].isalnum() and \
                    i + 1 < n and text[i + 1].isalnum():
                out.append(' ')
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != '\n':
                j += 2 if text[j] == '\\' else 1
            j = min(j + 1, n)
            out.append(' ' * (j - i))
            i = j
        elif c == '#' and (i == 0 or text[i - 1] == '\n'):
            # Preprocessor lines (with continuations) hold no braces we want.
            j = i
            while True:
                k = text.find('\n', j)
                if k < 0:
                    k = n
                    break
                if text[k - 1] != '\\':
                    break
                j = k + 1
            out.append(re.sub(r'[^\n]', ' ', text[i:k]))
            i = k
        else:
            out.append(c)
            i += 1
    return ''.join(out)


CONTAINER = re.compile(
    r'(^|[\s;}])(namespace|class|struct|union|enum)\b[^()]*$|extern\s*$',
    re.S)


def functions(text):
    """Yields (name, first_line, last_line) of each function body."""
    code = blank_literals(text)
    stack = []  # 'c' container, 'f' function, 'o' other brace
    head_start = 0
    line = 1
    open_line = {}
    name_of = {}
    for i, c in enumerate(code):
        if c == '\n':
            line += 1
        elif c == '{':
            head = code[head_start:i]
            kind = 'o'
            if all(k == 'c' for k in stack):
                flat = ' '.join(head.split())
                if CONTAINER.search(flat) or flat.endswith('extern'):
                    kind = 'c'
                elif ')' in flat and not re.search(r'=\s*[^=]*\(', flat.split(')')[0] + ')') \
                        and not flat.endswith('='):
                    kind = 'f'
            stack.append(kind)
            depth = len(stack)
            if kind == 'f':
                open_line[depth] = line
                m = re.search(r'([~\w:<>=!+\-*/&|\[\]]+)\s*\(', ' '.join(head.split()))
                name_of[depth] = m.group(1) if m else '?'
            head_start = i + 1
        elif c == '}':
            if stack:
                depth = len(stack)
                kind = stack.pop()
                if kind == 'f':
                    yield name_of[depth], open_line[depth], line
            head_start = i + 1
        elif c == ';':
            head_start = i + 1


def is_op_definition(rel):
    return rel.startswith('lib/Dialect/') and rel.endswith('Ops.cpp')


def sources(root):
    for top in ('lib', 'runtime', 'tools'):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if name.endswith(SOURCE_EXT):
                    path = os.path.join(dirpath, name)
                    yield os.path.relpath(path, root), path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('root')
    ap.add_argument('--allow', default='')
    ap.add_argument('--list', action='store_true')
    args = ap.parse_args()
    allowed = set()
    if args.allow:
        with open(args.allow) as f:
            for raw in f:
                entry = raw.split('#', 1)[0].strip()
                if entry:
                    allowed.add(entry)
    offenders = []  # (key, message)
    for rel, path in sources(args.root):
        with open(path, encoding='utf-8', errors='replace') as f:
            text = f.read()
        nlines = text.count('\n')
        in_scope = rel.startswith(('lib/', 'runtime/'))
        if rel == 'tools/bt-run/bt-run.cpp' and nlines > BTRUN_LIMIT:
            offenders.append((rel, '%s: %d lines (limit %d)' %
                              (rel, nlines, BTRUN_LIMIT)))
        if not in_scope:
            continue
        if nlines > FILE_LIMIT and not is_op_definition(rel):
            offenders.append((rel, '%s: %d lines (limit %d)' %
                              (rel, nlines, FILE_LIMIT)))
        for name, first, last in functions(text):
            length = last - first + 1
            if args.list:
                print('%s:%d: %s %d lines' % (rel, first, name, length))
            if length > FUNCTION_LIMIT:
                offenders.append(('%s:%s' % (rel, name),
                                  '%s:%d: function %s: %d lines (limit %d)' %
                                  (rel, first, name, length, FUNCTION_LIMIT)))
    status = 0
    found = set()
    for key, message in offenders:
        found.add(key)
        if key in allowed:
            print('known: ' + message)
        else:
            print('error: ' + message)
            status = 1
    for key in sorted(allowed - found):
        print('error: %s is in %s but within the limits now: remove it' %
              (key, args.allow))
        status = 1
    return status


if __name__ == '__main__':
    sys.exit(main())
