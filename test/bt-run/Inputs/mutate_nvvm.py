#!/usr/bin/env python3
"""Seeds a bug into one kernel of an NVVM gpu.module (`bt-run compile
--target cuda --emit nvvm`), for the CUDA emulator's seeded-bug tests
(test/bt-run/cuda-emu-seeded-bugs.test). Writes the mutated module to stdout.

  mutate_nvvm.py FILE remove-barrier KERNEL INDEX   delete the INDEX-th
      (0-based) nvvm.barrier0 of KERNEL
  mutate_nvvm.py FILE shared-row KERNEL BYTES       the shared array at the
      largest constant offset of the dynamic shared memory moves BYTES (one
      row) further: the block's shared memory is one row too small for it
  mutate_nvvm.py FILE shuffle-branch KERNEL         odd lanes skip KERNEL's
      first nvvm.shfl.sync (keeping their own value): a shuffle under a
      lane-dependent branch
  mutate_nvvm.py FILE swap-params KERNEL I J        the kernel reads
      parameter I where the host passes J and vice versa (same types)
  mutate_nvvm.py FILE bound-off-by-one KERNEL       KERNEL's first bound
      check `icmp "ult" %i, %n` becomes "ule" (one thread too many)
Fails (exit 1) when the kernel or the pattern is not found.
"""
import re
import sys


def kernel_span(lines, name):
    start = None
    for i, l in enumerate(lines):
        if re.match(r'\s*llvm\.func @%s\(' % re.escape(name), l):
            start = i
        elif start is not None and re.match(r'\s*llvm\.func ', l):
            return start, i
    if start is None:
        sys.exit('mutate_nvvm.py: no kernel @%s' % name)
    return start, len(lines)


def main():
    path, op, kernel = sys.argv[1], sys.argv[2], sys.argv[3]
    args = sys.argv[4:]
    lines = open(path).read().split('\n')
    lo, hi = kernel_span(lines, kernel)
    body = list(range(lo, hi))
    if op == 'remove-barrier':
        hits = [i for i in body if 'nvvm.barrier0' in lines[i]]
        k = int(args[0])
        if k >= len(hits):
            sys.exit('mutate_nvvm.py: @%s has %d barriers' % (kernel, len(hits)))
        del lines[hits[k]]
    elif op == 'shared-row':
        base = None
        for i in body:
            m = re.match(r'\s*(%\w+) = llvm\.mlir\.addressof @__dynamic_shmem__\d+', lines[i])
            if m:
                base = m.group(1)
        if base is None:
            sys.exit('mutate_nvvm.py: @%s uses no dynamic shared memory' % kernel)
        best = None
        for i in body:
            m = re.search(r'llvm\.getelementptr %s\[(\d+)\]' % re.escape(base), lines[i])
            if m and (best is None or int(m.group(1)) > best[1]):
                best = (i, int(m.group(1)))
        if best is None:
            sys.exit('mutate_nvvm.py: no constant offset into the shared memory of @%s' % kernel)
        i, off = best
        lines[i] = lines[i].replace('%s[%d]' % (base, off), '%s[%d]' % (base, off + int(args[0])))
    elif op == 'shuffle-branch':
        hits = [i for i in body if 'nvvm.shfl.sync' in lines[i]]
        if not hits:
            sys.exit('mutate_nvvm.py: @%s has no shuffle' % kernel)
        i = hits[0]
        m = re.match(r'(\s*)(%\w+) = nvvm\.shfl\.sync\s+(\w+) (%\w+), (%\w+), (%\w+), (%\w+) : (\w+) -> (\w+)$', lines[i])
        if not m:
            sys.exit('mutate_nvvm.py: unexpected shuffle: ' + lines[i])
        ind, res, kind, mask, val, off, clamp, ty, rty = m.groups()
        lines[i:i + 1] = [
            '%s%%bt_lane = nvvm.read.ptx.sreg.laneid : i32' % ind,
            '%s%%bt_one = llvm.mlir.constant(1 : i32) : i32' % ind,
            '%s%%bt_odd = llvm.and %%bt_lane, %%bt_one : i32' % ind,
            '%s%%bt_zero = llvm.mlir.constant(0 : i32) : i32' % ind,
            '%s%%bt_skip = llvm.icmp "ne" %%bt_odd, %%bt_zero : i32' % ind,
            '%sllvm.cond_br %%bt_skip, ^bt_skip, ^bt_shuffle' % ind,
            '%s^bt_shuffle:' % ind[:-2],
            '%s%%bt_s = nvvm.shfl.sync %s %s, %s, %s, %s : %s -> %s' % (ind, kind, mask, val, off, clamp, ty, rty),
            '%sllvm.br ^bt_join(%%bt_s : %s)' % (ind, rty),
            '%s^bt_skip:' % ind[:-2],
            '%sllvm.br ^bt_join(%s : %s)' % (ind, val, rty),
            '%s^bt_join(%s: %s):' % (ind[:-2], res, rty),
        ]
    elif op == 'swap-params':
        a, b = '%%arg%s' % args[0], '%%arg%s' % args[1]
        l = lines[lo]
        ta = re.search(r'%s: ([^,)]+)' % re.escape(a), l)
        tb = re.search(r'%s: ([^,)]+)' % re.escape(b), l)
        if not ta or not tb or ta.group(1) != tb.group(1):
            sys.exit('mutate_nvvm.py: @%s: parameters %s and %s missing or of different types' % (kernel, a, b))
        l = l.replace(a + ':', '%bt_tmp:').replace(b + ':', a + ':').replace('%bt_tmp:', b + ':')
        lines[lo] = l
    elif op == 'bound-off-by-one':
        for i in body:
            if re.search(r'llvm\.icmp "ult" %\w+, %arg\d+ : i64', lines[i]):
                lines[i] = lines[i].replace('"ult"', '"ule"', 1)
                break
        else:
            sys.exit('mutate_nvvm.py: @%s has no bound check' % kernel)
    else:
        sys.exit('mutate_nvvm.py: unknown mutation ' + op)
    sys.stdout.write('\n'.join(lines))


if __name__ == '__main__':
    main()
