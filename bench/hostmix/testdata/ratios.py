import re, sys, statistics as st
from collections import defaultdict
runs = defaultdict(list)  # (n,state,mode,impl,cpu) -> [ns]
for line in open(sys.argv[1]):
    m = re.match(r'BenchmarkHostMix/n=(\d+)/state=(\w+)/mode=(\w+)/impl=([\w-]+?)(?:-(\d+))?\s+\d+\s+([\d.]+) ns/op', line)
    if not m: continue
    n, state, mode, impl, cpu, ns = m.groups()
    runs[(n, state, mode, impl, int(cpu or 1))].append(float(ns))
def fmt(xs):
    return "%.2f (%.2f–%.2f)" % (st.median(xs), min(xs), max(xs))
print("## per-run ratios, median (min–max) of the runs")
print("| n | state | mode | cpu | kvbreaker ns | kv/syncmap | kv/sharded | kv-cached/syncmap | kv-cached/sharded |")
print("|---|---|---|---|---|---|---|---|---|")
for (n, state, mode, impl, cpu), xs in sorted(runs.items(), key=lambda kv: (int(kv[0][0]), kv[0][1], kv[0][2], kv[0][4])):
    if impl != "kvbreaker": continue
    row = [n, state, mode, str(cpu), "%.0f" % st.median(xs)]
    for a in ["kvbreaker", "kvbreaker-cached"]:
        for g in ["gobreaker-syncmap", "gobreaker-sharded"]:
            A, G = runs[(n, state, mode, a, cpu)], runs[(n, state, mode, g, cpu)]
            k = min(len(A), len(G))
            row.append(fmt([A[i]/G[i] for i in range(k)]) if k else "-")
    print("| " + " | ".join(row) + " |")
print()
print("## scaling: parallel ns/op at -cpu N over -cpu 1, per run, median (min–max)")
print("| n | state | impl | cpu 2/1 | cpu 4/1 | cpu 8/1 |")
print("|---|---|---|---|---|---|")
for n in ["10000", "100000"]:
    for state in ["closed", "open"]:
        for impl in ["kvbreaker", "kvbreaker-cached", "gobreaker-syncmap", "gobreaker-sharded"]:
            one = runs.get((n, state, "parallel", impl, 1))
            if not one: continue
            row = [n, state, impl]
            for c in [2, 4, 8]:
                xs = runs.get((n, state, "parallel", impl, c))
                row.append(fmt([xs[i]/one[i] for i in range(min(len(xs), len(one)))]) if xs else "-")
            print("| " + " | ".join(row) + " |")
