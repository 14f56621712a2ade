#!/usr/bin/env python3
"""Summarises kiln_gemm_bench's JSON output (--benchmark_format=json or --benchmark_out) as
one Markdown table per thread count: each shape's fraction of the FMA peak for kiln and for
oneDNN (median and best over the repetitions, both from the same process), kiln's median over
oneDNN's, and the plan kiln ran; the rows of MatMul_KilnGemmCold / MatMul_OneDnnCold (operands
flushed from the caches before each product), when present, as tables of their own. Standard
library only.

    kiln_gemm_bench --kiln_tune --benchmark_filter='MatMul_(KilnGemm|OneDnn)/' \\
        --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true --benchmark_out=gemm.json
    python3 scripts/gemm_table.py gemm.json
"""
import json
import re
import statistics
import sys
from collections import defaultdict

NAME = re.compile(
    r"(?:BM_)?MatMul_((?:KilnGemm|OneDnn)(?:Cold)?)/m:(\d+)/k:(\d+)/n:(\d+)/threads:(\d+)/ta:(\d)/tb:(\d)")


def load(path):
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    # (lib, m, k, n, threads, ta, tb) -> [(of_peak, label)]; lib "KilnGemm", "OneDnnCold"...
    # Rows in the order the benchmark registers its instances (random interleaving runs them,
    # and writes them, in another).
    runs = defaultdict(list)
    rows = sorted(report.get("benchmarks", []),
                  key=lambda b: (b.get("family_index", 0), b.get("per_family_instance_index", 0)))
    for b in rows:
        if b.get("run_type") == "aggregate" or "of_peak" not in b:
            continue
        match = NAME.match(b.get("run_name", b["name"]))
        if match is None:
            continue
        lib, *dims = match.groups()
        key = (lib,) + tuple(int(d) for d in dims)
        runs[key].append((b["of_peak"], b.get("label", "")))
    return report.get("context", {}), runs


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: gemm_table.py GEMM_BENCH.json")
    context, runs = load(argv[1])
    if not runs:
        sys.exit(f"gemm_table.py: no MatMul_KilnGemm/OneDnn rows in {argv[1]}")
    for field in ("kiln_cpu", "kiln_gemm_kernels", "kiln_gemm_blocking", "num_cpus", "date"):
        if field in context:
            print(f"- {field}: {context[field]}")
    tables(runs, "", "")
    tables(runs, "Cold", ", operands flushed from the caches before each product")


def tables(runs, variant, heading):
    """One table per thread count of the KilnGemm{variant} rows against OneDnn{variant}."""
    kiln_lib, dnnl_lib = "KilnGemm" + variant, "OneDnn" + variant
    shapes = []
    for key in runs:
        if key[0] == kiln_lib and key[1:] not in shapes:
            shapes.append(key[1:])
    for threads in sorted({s[3] for s in shapes}):
        print(f"\n{threads} thread(s){heading}: fraction of the FMA peak, median (best)\n")
        print("| shape | kiln | oneDNN | kiln / oneDNN | kiln plan |")
        print("|---|---|---|---|---|")
        ratios = []
        for m, k, n, t, ta, tb in (s for s in shapes if s[3] == threads):
            kiln = runs[(kiln_lib, m, k, n, t, ta, tb)]
            dnnl = runs.get((dnnl_lib, m, k, n, t, ta, tb), [])
            name = f"{m}x{k}x{n}" + (" ta" if ta else "") + (" tb" if tb else "")
            km = statistics.median(v for v, _ in kiln)
            cell = lambda rows: (f"{statistics.median(v for v, _ in rows):.2f} "
                                 f"({max(v for v, _ in rows):.2f})") if rows else "-"
            ratio = "-"
            if dnnl:
                r = km / statistics.median(v for v, _ in dnnl)
                ratios.append(r)
                ratio = f"{r:.2f}"
            print(f"| {name} | {cell(kiln)} | {cell(dnnl)} | {ratio} | {kiln[0][1]} |")
        if ratios:
            print(f"\nkiln / oneDNN at {threads} thread(s){heading}: median {statistics.median(ratios):.2f}, "
                  f"range {min(ratios):.2f}-{max(ratios):.2f} over {len(ratios)} shapes")


if __name__ == "__main__":
    main(sys.argv)
