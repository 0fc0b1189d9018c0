#!/usr/bin/env python3
"""Draws a kvsim --timeline file (Chrome Trace Event JSON) as one static SVG page: a row per
track (ops, streams, storage workers, faults), slices as boxes, flows as arrows, the violation
as a red line. For a look without Perfetto (no network); standard library only.

Usage: timeline_svg.py TIMELINE.json OUT.svg [--width PX]
"""
import argparse
import html
import json


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("timeline")
    ap.add_argument("out")
    ap.add_argument("--width", type=int, default=1400)
    a = ap.parse_args()
    events = json.load(open(a.timeline))["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    rows = sorted(names)
    row_of = {tid: i for i, tid in enumerate(rows)}
    tmax = max([e.get("ts", 0) + e.get("dur", 0) for e in events] + [1])
    left, top, rh = 140, 30, 28
    scale = (a.width - left - 10) / tmax
    x = lambda t: left + t * scale
    y = lambda tid: top + row_of[tid] * rh
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{a.width}" '
           f'height="{top + len(rows) * rh + 20}" font-family="monospace" font-size="10">',
           '<rect width="100%" height="100%" fill="white"/>']
    for tid in rows:
        out.append(f'<text x="4" y="{y(tid) + 17}">{html.escape(names[tid])}</text>')
        out.append(f'<line x1="{left}" x2="{a.width - 10}" y1="{y(tid) + rh - 2}" '
                   f'y2="{y(tid) + rh - 2}" stroke="#eee"/>')
    colours = {"op": "#9ecae1", "copy": "#a1d99b", "upload": "#c7e9c0", "transfer": "#fd8d3c",
               "wait": "#bcbddc", "poison": "#636363", "storage": "#fdd0a2", "event": "#dadaeb"}
    open_b = {}
    flows = {}
    for e in events:
        ph, tid = e["ph"], e.get("tid")
        if ph == "B":
            open_b.setdefault(tid, []).append(e)
        elif ph == "E" and open_b.get(tid):
            b = open_b[tid].pop()
            w = max(1.0, x(e["ts"]) - x(b["ts"]))
            title = html.escape(f'{b["name"]} {json.dumps(b.get("args", {}))}')
            out.append(f'<rect x="{x(b["ts"]):.1f}" y="{y(tid) + 3}" width="{w:.1f}" '
                       f'height="{rh - 8}" fill="{colours["op"]}" stroke="#3182bd" '
                       f'stroke-width="0.3"><title>{title}</title></rect>')
        elif ph == "X" and tid in row_of:
            w = max(1.0, e["dur"] * scale)
            title = html.escape(f'{e["name"]} {json.dumps(e.get("args", {}))}')
            out.append(f'<rect x="{x(e["ts"]):.1f}" y="{y(tid) + 3}" width="{w:.1f}" '
                       f'height="{rh - 8}" fill="{colours.get(e.get("cat"), "#ccc")}" '
                       f'stroke="#555" stroke-width="0.3"><title>{title}</title></rect>')
        elif ph in ("s", "f"):
            flows.setdefault(e["id"], {})[ph] = e
        elif ph == "i" and e.get("cat") == "violation":
            out.append(f'<line x1="{x(e["ts"]):.1f}" x2="{x(e["ts"]):.1f}" y1="{top}" '
                       f'y2="{top + len(rows) * rh}" stroke="red" stroke-width="2"/>')
            out.append(f'<text x="{x(e["ts"]) + 3:.1f}" y="{top - 4}" fill="red">'
                       f'{html.escape(e["name"])}</text>')
        elif ph == "i" and tid in row_of:
            out.append(f'<circle cx="{x(e["ts"]):.1f}" cy="{y(tid) + rh / 2}" r="3" '
                       f'fill="#e6550d"><title>{html.escape(e["name"])}</title></circle>')
    for f in flows.values():
        if "s" in f and "f" in f and f["s"]["tid"] in row_of and f["f"]["tid"] in row_of:
            out.append(f'<line x1="{x(f["s"]["ts"]) + 0.5:.1f}" y1="{y(f["s"]["tid"]) + rh / 2}" '
                       f'x2="{x(f["f"]["ts"]) + 0.5:.1f}" y2="{y(f["f"]["tid"]) + rh / 2}" '
                       f'stroke="#756bb1" stroke-width="1" marker-end="url(#a)"/>')
    out.insert(2, '<defs><marker id="a" markerWidth="6" markerHeight="6" refX="5" refY="3" '
                  'orient="auto"><path d="M0,0 L6,3 L0,6 z" fill="#756bb1"/></marker></defs>')
    out.append("</svg>")
    open(a.out, "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
