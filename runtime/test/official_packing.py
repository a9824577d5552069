"""A small re-implementation of the official training-data semantics, for data_test.cc.

Written from the behaviour of the official code (itsnamgyu/block-transformer @ 17842dd:
custom_dataset/tokenized_corpus.py TokenizedCorpusDataset in block mode, then the transforms
SplitBlocks(fixed), AddLabels of util/data_preprocessing.py), not copied from it. It follows the
official sample walk step by step -- a cursor in the padded corpus and a document index, emitting
left padding, document tokens, the EOS and right padding -- including the step back of one position
that happens after an EOS whose right padding is empty (the next document's left padding then
overwrites that EOS unless it ended the sample). bt's C++ (runtime/src/data.cc) computes each position
directly instead; the test checks that the two agree.

    official_packing.py randint SEED HIGH COUNT     -> JSON list (numpy RandomState int16 draws)
    official_packing.py randint-many '[[SEED, HIGH, COUNT], ...]'  -> a JSON list of such lists
    official_packing.py pack IN.json OUT.json       -> packed samples (IN may hold a list of
                                                       configurations: OUT is then a list)

IN.json: {"docs": [[ids...], ...], "length": T, "block_length": L, "eos": e, "pad": p, "seed": s,
          "random_pad_first_block": true, "pad_to_block_boundary": true}
OUT.json: {"left": [...], "right": [...], "samples": [{"input_ids": [[L]*N], "attention_mask": ...,
           "labels": ..., "block_attention_mask": [N]}, ...]}
Needs numpy (for RandomState); exits with status 3 without it.
"""

import json
import sys

try:
    import numpy as np
except ImportError:
    print("numpy unavailable", file=sys.stderr)
    sys.exit(3)


def left_pads(seed, block_length, n):
    return np.random.RandomState(seed).randint(block_length, size=n, dtype=np.int16).tolist()


def pack(cfg):
    docs, T, L = cfg["docs"], cfg["length"], cfg["block_length"]
    eos, pad = cfg["eos"], cfg["pad"]
    rand_pad = cfg.get("random_pad_first_block", True)
    to_boundary = cfg.get("pad_to_block_boundary", True)
    n = len(docs)
    left = left_pads(cfg["seed"], L, n) if rand_pad else [0] * n
    right = []
    starts = [0]
    for d in range(n):
        used = left[d] + len(docs[d]) + 1
        r = (L - used % L) % L if to_boundary else 0
        right.append(r)
        starts.append(starts[-1] + used + r)
    total = starts[-1]
    samples = []
    for k in range(total // T):
        ids, mask = [None] * T, [None] * T
        cursor = k * T  # position in the padded corpus
        d = max(i for i in range(n) if starts[i] <= cursor)
        s = 0  # position in the sample
        while s < T:
            if d == n:
                # Past the last document (the official walk raises IndexError here: it leaves the
                # last document one position early when that document has right padding and the
                # corpus ends exactly at the end of this sample); what remains is padding.
                ids[s:], mask[s:] = [pad] * (T - s), [0] * (T - s)
                break
            off = cursor - starts[d] - left[d]  # relative to the document's first token
            room = T - s
            if off < 0:  # left padding
                m = min(-off, room)
                ids[s:s + m], mask[s:s + m] = [pad] * m, [0] * m
                cursor, s = cursor + m, s + m
            elif off < len(docs[d]):  # tokens
                m = min(len(docs[d]) - off, room)
                ids[s:s + m], mask[s:s + m] = docs[d][off:off + m], [1] * m
                cursor, s = cursor + m, s + m
            elif off == len(docs[d]):  # the EOS
                ids[s], mask[s] = eos, 1
                cursor, s = cursor + 1, s + 1
                if not to_boundary:
                    d += 1
            else:  # right padding
                # The official walk counts the right padding used from 1 at its first position
                # (off - len), so it leaves the document one position early; the next document's
                # left padding makes up for it, except as described below and above.
                remaining = right[d] - (off - len(docs[d]))
                m = min(remaining, room)
                # With right[d] == 0, remaining is -1: the walk steps back one position and the
                # next document's left padding is written over the EOS.
                if m > 0:
                    ids[s:s + m], mask[s:s + m] = [pad] * m, [0] * m
                cursor, s = cursor + m, s + m
                if m == remaining:
                    d += 1
        labels = [i if m else -100 for i, m in zip(ids, mask)]
        blocks = lambda v: [v[b * L:(b + 1) * L] for b in range(T // L)]
        samples.append({"input_ids": blocks(ids), "attention_mask": blocks(mask), "labels": blocks(labels),
                        "block_attention_mask": [int(any(x)) for x in blocks(mask)]})
    return {"left": left, "right": right, "samples": samples}


def main():
    if sys.argv[1] == "randint":
        seed, high, count = map(int, sys.argv[2:5])
        print(json.dumps(left_pads(seed, high, count)))
    elif sys.argv[1] == "randint-many":
        print(json.dumps([left_pads(*args) for args in json.loads(sys.argv[2])]))
    elif sys.argv[1] == "pack":
        with open(sys.argv[2]) as f:
            cfg = json.load(f)
        with open(sys.argv[3], "w") as f:
            json.dump([pack(c) for c in cfg] if isinstance(cfg, list) else pack(cfg), f)
    else:
        sys.exit(f"usage: {sys.argv[0]} randint SEED HIGH COUNT | randint-many JSON | pack IN.json OUT.json")


if __name__ == "__main__":
    main()
