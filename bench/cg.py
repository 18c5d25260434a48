#!/usr/bin/env python3
"""Per-request costs out of two callgrind runs of one case.

bench/instructions.sh (INSTRUCTIONS_KEEP=DIR) and bench/json_walk.sh
(JSON_WALK_KEEP=DIR) run each case twice, with N0 and N1 requests or
iterations; the difference of the two runs, divided by N1 - N0, is one
request with start-up and shutdown cancelled out. This reads such a pair
(`CASE.200.out CASE.1200.out`) and prints what one request costs:

  bench/cg.py funcs  N A0 A1 [B0 B1] [--incl] [--top K]
      by function, self (or inclusive, with callgrind_annotate's
      --inclusive=yes); with a second pair, the first, the second and
      their difference side by side (one binary against another, or a
      case against `floor`), largest difference first
  bench/cg.py areas  N A0 A1 [B0 B1]   self costs summed by where the
                                      function comes from (regroup's
                                      crates, hyper, tokio, the allocator…)
  bench/cg.py callers N A0 A1 NAME    who calls functions whose name holds
                                      NAME, what it costs them, how often
  bench/cg.py callees N A0 A1 NAME    what functions whose name holds NAME
                                      call, inclusive, how often
  bench/cg.py lines  N A0 A1 NAME     self cost by source line within
                                      functions whose name holds NAME

N is the difference in requests (1000 for instructions.sh's default,
2000 for json_walk.sh's). Inclusive costs of recursive functions count a
recursion more than once: read them for the layers above the recursion.

  INSTRUCTIONS_CASES="floor no-name" INSTRUCTIONS_KEEP=/tmp/cg bench/instructions.sh
  bench/cg.py funcs 1000 /tmp/cg/floor.200.out /tmp/cg/floor.1200.out \\
      /tmp/cg/no-name.200.out /tmp/cg/no-name.1200.out   # regroup over the floor
"""
import argparse
import collections
import re
import signal
import subprocess
import sys


def annotate(path, incl):
    """Function -> cost, by callgrind_annotate."""
    out = subprocess.run(
        ["callgrind_annotate", f"--inclusive={'yes' if incl else 'no'}",
         "--threshold=100", "--auto=no", "--show-percs=no", path],
        capture_output=True, text=True, check=True).stdout
    costs = collections.Counter()
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)$", line)
        if not m:
            continue
        try:
            v = int(m.group(1).replace(",", ""))
        except ValueError:
            continue
        name = m.group(2)
        # `file:function [object]`: the function only.
        if name.startswith(("/", ".", "?")) and ":" in name:
            name = name.split(":", 1)[1]
        costs[re.sub(r" \[[^\]]*\]$", "", name)] += v
    return costs


class Profile:
    """One callgrind output file: self cost by (function, file, line), and
    calls by (caller, callee) with their inclusive cost."""

    def __init__(self, path):
        self.lines = collections.Counter()
        self.calls = collections.Counter()
        self.count = collections.Counter()
        fns, files = {}, {}

        def named(table, s):
            m = re.match(r"\((\d+)\)(?: (.*))?", s)
            if not m:
                return s
            if m.group(2) is not None:
                table[m.group(1)] = m.group(2)
            return table[m.group(1)]

        fn = cfn = file = fl = None
        positions = 1
        last = [0, 0]
        pending = None
        with open(path) as f:
            for raw in f:
                line = raw.rstrip("\n")
                if not line:
                    continue
                if line.startswith("positions:"):
                    positions = len(line.split()) - 1
                    continue
                head, _, rest = line.partition("=")
                if head == "fl":
                    fl = file = named(files, rest)
                    continue
                if head in ("fi", "fe"):
                    file = named(files, rest)
                    continue
                if head == "fn":
                    fn = named(fns, rest)
                    file = fl
                    continue
                if head == "cfn":
                    cfn = named(fns, rest)
                    continue
                if head in ("cfi", "cfl"):
                    named(files, rest)
                    continue
                if line.startswith("calls="):
                    pending = int(line[6:].split()[0])
                    continue
                if not (line[0].isdigit() or line[0] in "+-*"):
                    continue
                parts = line.split()
                for i in range(positions):
                    p = parts[i]
                    if p == "*":
                        continue
                    if p[0] in "+-":
                        last[i] += int(p)
                    else:
                        last[i] = int(p, 16) if p.startswith("0x") else int(p)
                cost = int(parts[positions]) if len(parts) > positions else 0
                if pending is not None:
                    self.calls[(fn, cfn)] += cost
                    self.count[(fn, cfn)] += pending
                    pending = None
                else:
                    self.lines[(fn, file, last[positions - 1])] += cost


def per(a0, a1, n):
    return {k: (a1.get(k, 0) - a0.get(k, 0)) / n for k in set(a0) | set(a1)}


def funcs(args):
    a = per(annotate(args.files[0], args.incl), annotate(args.files[1], args.incl), args.n)
    if len(args.files) == 2:
        for k in sorted(a, key=lambda k: -abs(a[k]))[: args.top]:
            print(f"{a[k]:10.1f}  {k[:160]}")
        return
    if len(args.files) != 4:
        sys.exit("funcs: two files, or four")
    b = per(annotate(args.files[2], args.incl), annotate(args.files[3], args.incl), args.n)
    print(f"{'B - A':>10} {'A':>10} {'B':>10}")
    keys = set(a) | set(b)
    for k in sorted(keys, key=lambda k: -abs(b.get(k, 0) - a.get(k, 0)))[: args.top]:
        print(f"{b.get(k, 0) - a.get(k, 0):10.1f} {a.get(k, 0):10.1f} {b.get(k, 0):10.1f}  {k[:150]}")


# Where a function comes from, by its name; the first that matches.
AREAS = [
    ("regroup-core, regroup-config", ("regroup_core::", "regroup_config::")),
    ("regroup's proxy", ("regroup::",)),
    ("the floor's own (hyper_floor)", ("hyper_floor::",)),
    ("hyper, http, httparse, h2", ("hyper::", "httparse::", "http::", "h2::")),
    ("tokio, mio", ("tokio::", "mio::")),
    ("aho-corasick, memchr, simdutf8", ("aho_corasick::", "memchr::", "simdutf8::")),
    ("allocator, memcpy", ("malloc", "free", "memcpy", "memmove", "memcmp", "memset",
                           "_int_", "realloc", "memalign", "__rdl_", "__rust_alloc",
                           "__rust_dealloc", "__rust_realloc")),
    ("clock reads, float math", ("Timespec", "clock_gettime", "pow", "floattidf")),
]


def area(name):
    for label, marks in AREAS:
        if any(m in name for m in marks):
            return label
    return "everything else"


def areas(args):
    pairs = [args.files[i:i + 2] for i in range(0, len(args.files), 2)]
    if len(args.files) not in (2, 4):
        sys.exit("areas: two files, or four")
    sums = []
    for a0, a1 in pairs:
        costs = per(annotate(a0, False), annotate(a1, False), args.n)
        total = costs.pop("PROGRAM TOTALS", 0)
        by = collections.Counter()
        for k, v in costs.items():
            by[area(k)] += v
        by["total"] = total
        sums.append(by)
    labels = [a for a, _ in AREAS] + ["everything else", "total"]
    for label in labels:
        row = " ".join(f"{s[label]:10.0f}" for s in sums)
        diff = f" {sums[1][label] - sums[0][label]:10.0f}" if len(sums) == 2 else ""
        print(f"{row}{diff}  {label}")


def edges(args, side):
    a, b = Profile(args.files[0]), Profile(args.files[1])
    cost, count = collections.Counter(), collections.Counter()
    for p, sign in ((a, -1), (b, 1)):
        for (caller, callee), v in p.calls.items():
            this, other = (callee, caller) if side == "callers" else (caller, callee)
            if this and args.name in this:
                cost[other] += sign * v
                count[other] += sign * p.count[(caller, callee)]
    for k in sorted(cost, key=lambda k: -abs(cost[k]))[: args.top]:
        if abs(cost[k]) / args.n >= 1:
            print(f"{cost[k] / args.n:10.1f} {count[k] / args.n:7.2f}x  {(k or '?')[:150]}")


def lines(args):
    a, b = Profile(args.files[0]), Profile(args.files[1])
    cost = collections.Counter()
    for p, sign in ((a, -1), (b, 1)):
        for (fn, file, line), v in p.lines.items():
            if fn and args.name in fn:
                cost[((file or "?").split("/")[-1], line)] += sign * v
    print(f"self {sum(cost.values()) / args.n:.0f}")
    for k in sorted(cost, key=lambda k: -abs(cost[k]))[: args.top]:
        if abs(cost[k]) / args.n >= 1:
            print(f"{cost[k] / args.n:10.1f}  {k[0]}:{k[1]}")


def main():
    # A reader that stops early (`| head`) ends the printing quietly.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["funcs", "areas", "callers", "callees", "lines"])
    ap.add_argument("n", type=float, help="requests between the two runs")
    ap.add_argument("files", nargs="+", help="callgrind outputs, the shorter run first")
    ap.add_argument("--incl", action="store_true", help="funcs: inclusive costs")
    ap.add_argument("--top", type=int, default=50)
    args = ap.parse_args()
    if args.what == "funcs":
        funcs(args)
        return
    if args.what == "areas":
        areas(args)
        return
    if len(args.files) != 3:
        sys.exit(f"{args.what}: two files and a name")
    args.name = args.files.pop()
    if args.what == "lines":
        lines(args)
    else:
        edges(args, args.what)


if __name__ == "__main__":
    main()
