#!/usr/bin/env python3
"""Checks a `bench --csv` file (docs/bench.md) for format and consistency,
with the Python standard library only:

    check_bench_csv.py CSV --rows N [--impls bt,torch]

Every row must have every column; numbers must parse and be positive where a
measurement is reported; the derived columns must agree with their
definitions (tokens = batch x tokens per row, tokens_per_s = tokens /
seconds, ...). Prints one line per row checked and exits 1 on the first
problem. Not a timing test: it never compares speeds.
"""
import argparse
import csv
import sys

HEADER = ("setting,device,model,batch,tokens,seconds,tokens_per_s,impl,"
          "ratio_vs_torch,peak_rss_mb,prompt_tokens,gen_tokens,total_tokens,"
          "total_tokens_per_s,prefill_seconds,decode_tokens_per_s,"
          "kv_bytes_per_sample,planned_kv_bytes_per_sample,max_batch").split(",")
GENERATION = ("prefill-heavy", "decode-heavy")


def fail(msg):
    print("check_bench_csv: " + msg)
    sys.exit(1)


def rate_matches(rate, count, seconds):
    """rate == count / seconds up to the CSV's rounding (seconds to 1e-6,
    rates to 1e-2)."""
    lo = count / (seconds + 5e-7) - 0.01
    hi = count / max(seconds - 5e-7, 1e-12) + 0.01
    return lo * (1 - 1e-9) <= rate <= hi * (1 + 1e-9)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--impls", default="bt")
    a = ap.parse_args()
    with open(a.csv, newline="") as f:
        rows = list(csv.reader(f))
    if not rows or rows[0] != HEADER:
        fail("header is %r, expected %r" % (rows[0] if rows else None, HEADER))
    body = rows[1:]
    if len(body) != a.rows:
        fail("%d rows, expected %d" % (len(body), a.rows))
    impls = a.impls.split(",")
    for n, row in enumerate(body, 1):
        if len(row) != len(HEADER):
            fail("row %d has %d fields, expected %d" % (n, len(row), len(HEADER)))
        r = dict(zip(HEADER, row))
        where = "row %d (%s %s batch %s)" % (n, r["impl"], r["setting"], r["batch"])
        if r["impl"] not in impls:
            fail("%s: impl %r not in %r" % (where, r["impl"], impls))

        def num(name, kind=float, positive=True):
            try:
                v = kind(r[name])
            except ValueError:
                fail("%s: %s = %r is not a number" % (where, name, r[name]))
            if positive and not v > 0:
                fail("%s: %s = %r is not positive" % (where, name, r[name]))
            return v

        batch, prompt = num("batch", int), num("prompt_tokens", int)
        gen = num("gen_tokens", int, positive=False)
        tokens, total = num("tokens", int), num("total_tokens", int)
        seconds, tps = num("seconds"), num("tokens_per_s")
        total_tps, rss = num("total_tokens_per_s"), num("peak_rss_mb")
        max_batch = num("max_batch", int, positive=False)
        if max_batch not in (0, 1):
            fail("%s: max_batch = %d" % (where, max_batch))
        if not rate_matches(tps, tokens, seconds) or not rate_matches(total_tps, total, seconds):
            fail("%s: tokens_per_s %g / total %g disagree with tokens %d, total %d "
                 "over %g s" % (where, tps, total_tps, tokens, total, seconds))
        if r["impl"] == "torch" and r["ratio_vs_torch"] != "1.0000":
            fail("%s: ratio_vs_torch = %r" % (where, r["ratio_vs_torch"]))
        if r["impl"] == "bt" and "torch" in impls:
            num("ratio_vs_torch")
        if r["setting"] == "forward":
            if gen != 0 or tokens != batch * prompt or total != tokens or max_batch:
                fail("%s: forward lengths gen %d tokens %d total %d max_batch %d"
                     % (where, gen, tokens, total, max_batch))
            for name in ("prefill_seconds", "decode_tokens_per_s",
                         "kv_bytes_per_sample", "planned_kv_bytes_per_sample"):
                if r[name] != "":
                    fail("%s: %s = %r, expected empty for a forward" % (where, name, r[name]))
        elif r["setting"] in GENERATION:
            if gen < 1 or tokens != batch * gen or total != batch * (prompt + gen):
                fail("%s: generation lengths batch %d prompt %d gen %d: tokens %d "
                     "total %d" % (where, batch, prompt, gen, tokens, total))
            prefill, dtps = num("prefill_seconds"), num("decode_tokens_per_s")
            kv, planned = num("kv_bytes_per_sample", int), num("planned_kv_bytes_per_sample", int)
            if not prefill < seconds:
                fail("%s: prefill %g s is not within the call's %g s" % (where, prefill, seconds))
            if not dtps >= tps * 0.999:
                fail("%s: decode tok/s %g < tok/s %g (decode excludes the prefill)"
                     % (where, dtps, tps))
            # The plan counts ceil(prompt/L_B) + ceil(gen/L_B) entries plus
            # the local scratch; implementations allocate at most that many
            # entries (one less: the last generated block is never appended),
            # bt with 8 B of key-valid flags per entry.
            if not kv <= planned + 8 * (prompt + gen):
                fail("%s: allocated KV %d B per sample exceeds the plan's %d B "
                     "(+ flags)" % (where, kv, planned))
        else:
            fail("%s: unknown setting %r" % (where, r["setting"]))
        print("ok %s: %s tok/s" % (where, r["tokens_per_s"]))


if __name__ == "__main__":
    main()
