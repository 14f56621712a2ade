#!/usr/bin/env python3
"""Chart of `kiln bench --json FILE` results as an SVG (python3 standard library only).

Usage: python3 scripts/plot_bench.py bench.json [docs/bench_ratios.svg]

For each workload, three bars on a log axis, each a median time divided by the compiled
variant's median time: eager / compiled (how much faster compiling made it), hand-written /
compiled (below 1: the hand-written C++ is faster) and limit / compiled (the fraction of the
GEMM or memory-bandwidth limit the compiled code reaches). The line at 1 is the compiled time.
"""
import json
import math
import sys
from xml.sax.saxutils import escape

SERIES = [  # (variant, label, colour)
    ("eager", "eager / compiled", "#d95f02"),
    ("hand_written", "hand-written / compiled", "#1b9e77"),
    ("limit", "limit / compiled (GEMMs or copy)", "#7570b3"),
]
LO, HI = 0.01, 100.0  # axis range (log10)
LEFT, RIGHT, TOP, BAR, GAP, AXIS_W = 230, 60, 60, 12, 14, 520


def x_of(ratio):
    r = min(max(ratio, LO), HI)
    return LEFT + AXIS_W * (math.log10(r) - math.log10(LO)) / (math.log10(HI) - math.log10(LO))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    data = json.load(open(sys.argv[1]))
    out_path = sys.argv[2] if len(sys.argv) > 2 else "docs/bench_ratios.svg"
    rows = data["workloads"]
    group_h = len(SERIES) * BAR + GAP
    height = TOP + len(rows) * group_h + 70
    width = LEFT + AXIS_W + RIGHT
    svg = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">'
        f"kiln bench: median time / compiled median time "
        f"({data['threads']} threads, {escape(data['host_cpu'])})</text>",
    ]
    axis_bottom = TOP + len(rows) * group_h
    for p in range(int(math.log10(LO)), int(math.log10(HI)) + 1):
        x = x_of(10.0**p)
        svg.append(f'<line x1="{x:.1f}" y1="{TOP - 8}" x2="{x:.1f}" y2="{axis_bottom}" '
                   f'stroke="{"#000" if p == 0 else "#ddd"}"/>')
        svg.append(f'<text x="{x:.1f}" y="{axis_bottom + 16}" text-anchor="middle">'
                   f"{10.0**p:g}</text>")
    svg.append(f'<text x="{x_of(1) + 4:.1f}" y="{TOP - 12}">compiled</text>')
    for i, w in enumerate(rows):
        y0 = TOP + i * group_h
        svg.append(f'<text x="{LEFT - 8}" y="{y0 + group_h / 2:.1f}" text-anchor="end">'
                   f"{escape(w['name'])}</text>")
        compiled = w["variants"]["compiled"]["median_ms"]
        for j, (key, _, colour) in enumerate(SERIES):
            v = w["variants"].get(key)
            y = y0 + j * BAR
            if not v:
                svg.append(f'<text x="{x_of(1) + 4:.1f}" y="{y + BAR - 2}" font-size="10" '
                           f'fill="#888">no {key.replace("_", "-")} baseline</text>')
                continue
            r = v["median_ms"] / compiled
            x1, x2 = sorted((x_of(1), x_of(r)))
            svg.append(f'<rect x="{x1:.1f}" y="{y}" width="{max(x2 - x1, 1):.1f}" '
                       f'height="{BAR - 2}" fill="{colour}"/>')
            tx = x2 + 4 if r >= 1 else x1 - 4
            anchor = "start" if r >= 1 else "end"
            svg.append(f'<text x="{tx:.1f}" y="{y + BAR - 3}" font-size="10" '
                       f'text-anchor="{anchor}">{r:.2f}</text>')
    ly = axis_bottom + 36
    for j, (_, label, colour) in enumerate(SERIES):
        lx = LEFT + j * 190 - 120
        svg.append(f'<rect x="{lx}" y="{ly}" width="12" height="10" fill="{colour}"/>')
        svg.append(f'<text x="{lx + 16}" y="{ly + 9}">{escape(label)}</text>')
    svg.append(f'<text x="{LEFT - 120}" y="{ly + 28}" font-size="10" fill="#555">'
               "right of 1: slower than compiled; left of 1: faster (log scale)</text>")
    svg.append("</svg>")
    with open(out_path, "w") as f:
        f.write("\n".join(svg) + "\n")
    print(f"wrote {out_path}")


if __name__ == "__main__":
    main()
