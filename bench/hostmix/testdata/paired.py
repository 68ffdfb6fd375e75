# Ratios of each label's kvbreaker-mirror to gobreaker-slice measured in the
# same run (seconds apart), for ns/op and cpu-ns/op, over interleave.sh's
# output: median and range of the runs.
import re, statistics, sys

runs = {}
for line in open(sys.argv[1]):
    m = re.match(r'BenchmarkHostMix/n=(\d+)/state=(\w+)/mode=\w+/impl=(\S+?)-\d+\s+\d+\s+([\d.]+) ns/op\s+([\d.]+) cpu-ns/op', line)
    if not m:
        continue
    n, state, impl, ns, cpu = m.groups()
    label = impl.split('@')[-1]
    kind = 'slice' if impl.startswith('gobreaker-slice@') else 'kv'
    runs.setdefault((label, n, state), []).append((kind, float(ns), float(cpu)))
for (label, n, state), v in sorted(runs.items()):
    for idx, name in ((1, 'ns/op'), (2, 'cpu-ns/op')):
        rs = []
        for i in range(0, len(v) - 1, 2):
            a, b = v[i], v[i + 1]
            assert a[0] == 'kv' and b[0] == 'slice', (a, b)
            rs.append(a[idx] / b[idx])
        print(f"{label} n={n} {state} {name}: {statistics.median(rs):.2f} ({min(rs):.2f}–{max(rs):.2f}), {len(rs)} runs")
