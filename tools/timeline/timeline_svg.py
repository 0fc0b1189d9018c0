#!/usr/bin/env python3
"""Draws a kvsim --timeline file (Chrome Trace Event JSON) as one static SVG page, for a look
without Perfetto (no network; standard library only). Perfetto (https://ui.perfetto.dev, open the
JSON) remains the tool for long runs: it zooms, searches and shows every argument.

The page: a title; an x axis numbered by op (1-based, as the run summary's "after op N"), with a
grid line at each labelled op; a row per track (ops, streams, storage workers, faults), slices as
boxes, labelled where they are wide enough, flows as arrows; below, the requests, one bar per
request from arrival to finish or abort, coloured by phase (waiting, running, offloaded) and
packed into as few lanes as they allow; the violation as a red line; a legend. Every box has a
tooltip with its arguments. The width grows with the number of ops (--px-per-op) up to
--max-width, so a few thousand ops stay legible when scrolled.

Usage: timeline_svg.py TIMELINE.json OUT.svg [--px-per-op PX] [--max-width PX]
"""
import argparse
import html
import json

COLOURS = {"op": "#9ecae1", "copy": "#a1d99b", "upload": "#c7e9c0", "transfer": "#fd8d3c",
           "wait": "#bcbddc", "poison": "#636363", "storage": "#fdd0a2", "event": "#dadaeb"}
PHASES = {"waiting": "#fee391", "running": "#74c476", "offloaded": "#9e9ac8"}


def esc(s):
    return html.escape(str(s))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("timeline")
    ap.add_argument("out")
    ap.add_argument("--px-per-op", type=float, default=12.0)
    ap.add_argument("--max-width", type=int, default=20000)
    ap.add_argument("--width", type=int, default=0, help="a fixed width (overrides the two above)")
    a = ap.parse_args()
    doc = json.load(open(a.timeline))
    events = doc["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    rows = sorted(names)
    row_of = {tid: i for i, tid in enumerate(rows)}
    tmax = max([e.get("ts", 0) + e.get("dur", 0) for e in events] + [1])

    # Op numbers on the clock: each op's B event carries op_number (1-based).
    op_ts = [(e["ts"], e.get("args", {}).get("op_number")) for e in events
             if e["ph"] == "B" and e.get("cat") == "op"]
    n_ops = len(op_ts)
    width = a.width or int(min(a.max_width, max(1200, 160 + n_ops * a.px_per_op)))
    left, rh = 150, 26
    title_h, axis_h = 22, 24
    top = title_h + axis_h
    scale = (width - left - 10) / tmax
    x = lambda t: left + t * scale

    # Requests: async b/e pairs with cat "request"; the outer span is "request <rid>".
    spans = {}  # rid -> {"start", "end", "phases": [(name, start, end)]}
    open_phase = {}
    for e in events:
        if e.get("cat") != "request" or e["ph"] not in ("b", "e"):
            continue
        rid = e["id"]
        r = spans.setdefault(rid, {"start": None, "end": None, "phases": []})
        if e["name"].startswith("request "):
            if e["ph"] == "b":
                r["start"] = e["ts"]
            else:
                r["end"] = e["ts"]
        elif e["ph"] == "b":
            open_phase[(rid, e["name"])] = e["ts"]
        else:
            start = open_phase.pop((rid, e["name"]), None)
            if start is not None:
                r["phases"].append((e["name"], start, e["ts"]))
    lanes_end = []  # packing: each request goes to the first lane free at its start
    lane_of = {}
    for rid, r in sorted(spans.items(), key=lambda kv: (kv[1]["start"] or 0, kv[0])):
        if r["start"] is None:
            continue
        end = r["end"] if r["end"] is not None else tmax
        for i, lane_end in enumerate(lanes_end):
            if lane_end < r["start"]:
                lanes_end[i] = end
                lane_of[rid] = i
                break
        else:
            lanes_end.append(end)
            lane_of[rid] = len(lanes_end) - 1
    req_top = top + len(rows) * rh + 24
    lane_h = 12
    legend_top = req_top + max(1, len(lanes_end)) * lane_h + 24
    height = legend_top + 40

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="monospace" font-size="10">',
           '<defs><marker id="a" markerWidth="6" markerHeight="6" refX="5" refY="3" '
           'orient="auto"><path d="M0,0 L6,3 L0,6 z" fill="#756bb1"/></marker></defs>',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="4" y="15" font-size="13" font-weight="bold">kvsim timeline: {n_ops} ops, '
           f'{len(spans)} requests (x: op number; open the JSON in ui.perfetto.dev to zoom)</text>']

    # Axis: op numbers at "nice" steps, a grid line per label.
    if op_ts:
        target_labels = max(2, (width - left) // 70)
        step = 1
        for s in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000):
            step = s
            if n_ops / s <= target_labels:
                break
        axis_y = top - 6
        out.append(f'<line x1="{left}" x2="{width - 10}" y1="{axis_y}" y2="{axis_y}" '
                   f'stroke="#333"/>')
        out.append(f'<text x="4" y="{axis_y - 3}">op</text>')
        for ts, number in op_ts:
            if number is None or (number != 1 and number % step != 0):
                continue
            out.append(f'<line x1="{x(ts):.1f}" x2="{x(ts):.1f}" y1="{axis_y - 4}" '
                       f'y2="{req_top + len(lanes_end) * lane_h}" stroke="#e8e8e8"/>')
            out.append(f'<text x="{x(ts):.1f}" y="{axis_y - 6}" text-anchor="middle">'
                       f'{number}</text>')

    for tid in rows:
        y0 = top + row_of[tid] * rh
        out.append(f'<text x="4" y="{y0 + 16}">{esc(names[tid])}</text>')
        out.append(f'<line x1="{left}" x2="{width - 10}" y1="{y0 + rh - 2}" '
                   f'y2="{y0 + rh - 2}" stroke="#eee"/>')

    def box(x0, w, y0, fill, stroke, label, tip):
        out.append(f'<rect x="{x0:.1f}" y="{y0 + 3}" width="{w:.1f}" height="{rh - 8}" '
                   f'fill="{fill}" stroke="{stroke}" stroke-width="0.3"><title>{esc(tip)}'
                   f'</title></rect>')
        if w >= 6.5 * len(label) + 4:  # room for the label inside
            out.append(f'<text x="{x0 + 2:.1f}" y="{y0 + rh / 2 + 3:.1f}" '
                       f'pointer-events="none">{esc(label)}</text>')

    open_b = {}
    flows = {}
    violation = None
    for e in events:
        ph, tid = e["ph"], e.get("tid")
        if ph == "B":
            open_b.setdefault(tid, []).append(e)
        elif ph == "E" and open_b.get(tid) and tid in row_of:
            b = open_b[tid].pop()
            w = max(1.0, x(e["ts"]) - x(b["ts"]))
            args = b.get("args", {})
            label = "%s %s" % (args.get("op_number", ""), b["name"])
            box(x(b["ts"]), w, top + row_of[tid] * rh, COLOURS["op"], "#3182bd", label,
                "op %s: %s %s" % (args.get("op_number", "?"), b["name"], json.dumps(args)))
        elif ph == "X" and tid in row_of:
            w = max(1.0, e["dur"] * scale)
            box(x(e["ts"]), w, top + row_of[tid] * rh, COLOURS.get(e.get("cat"), "#ccc"), "#555",
                e["name"], "%s %s" % (e["name"], json.dumps(e.get("args", {}))))
        elif ph in ("s", "f"):
            flows.setdefault(e["id"], {})[ph] = e
        elif ph == "i" and e.get("cat") == "violation":
            violation = e
        elif ph == "i" and tid in row_of:
            out.append(f'<circle cx="{x(e["ts"]):.1f}" cy="{top + row_of[tid] * rh + rh / 2}" '
                       f'r="3" fill="#e6550d"><title>{esc(e["name"])} '
                       f'{esc(json.dumps(e.get("args", {})))}</title></circle>')
    for f in flows.values():
        if "s" in f and "f" in f and f["s"]["tid"] in row_of and f["f"]["tid"] in row_of:
            out.append(f'<line x1="{x(f["s"]["ts"]) + 0.5:.1f}" '
                       f'y1="{top + row_of[f["s"]["tid"]] * rh + rh / 2}" '
                       f'x2="{x(f["f"]["ts"]) + 0.5:.1f}" '
                       f'y2="{top + row_of[f["f"]["tid"]] * rh + rh / 2}" '
                       f'stroke="#756bb1" stroke-width="1" marker-end="url(#a)"/>')

    # Requests.
    out.append(f'<text x="4" y="{req_top - 8}" font-weight="bold">requests</text>')
    out.append(f'<text x="4" y="{req_top + 8}">{len(lanes_end)} lane(s)</text>')
    for rid, lane in sorted(lane_of.items()):
        r = spans[rid]
        y0 = req_top + lane * lane_h
        end = r["end"] if r["end"] is not None else tmax
        out.append(f'<rect x="{x(r["start"]):.1f}" y="{y0}" '
                   f'width="{max(1.0, x(end) - x(r["start"])):.1f}" height="{lane_h - 2}" '
                   f'fill="#f0f0f0" stroke="#999" stroke-width="0.3"><title>request {rid}'
                   f'{"" if r["end"] is not None else " (still live at the end)"}</title></rect>')
        for name, s, t in r["phases"]:
            out.append(f'<rect x="{x(s):.1f}" y="{y0 + 1}" width="{max(0.5, x(t) - x(s)):.1f}" '
                       f'height="{lane_h - 4}" fill="{PHASES.get(name, "#ccc")}">'
                       f'<title>request {rid}: {esc(name)}</title></rect>')
        label = "r%s" % rid
        if x(end) - x(r["start"]) >= 6.5 * len(label) + 4:
            out.append(f'<text x="{x(r["start"]) + 2:.1f}" y="{y0 + lane_h - 3}" font-size="8" '
                       f'pointer-events="none">{label}</text>')

    if violation is not None:
        vx = x(violation["ts"])
        out.append(f'<line x1="{vx:.1f}" x2="{vx:.1f}" y1="{top}" '
                   f'y2="{req_top + len(lanes_end) * lane_h}" stroke="red" stroke-width="2"/>')
        out.append(f'<text x="{vx + 3:.1f}" y="{top + 10}" fill="red" font-weight="bold">'
                   f'{esc(violation["name"])} (op {violation.get("args", {}).get("op_number", "?")})'
                   f'</text>')

    # Legend.
    lx = 4
    items = [("op", COLOURS["op"]), ("copy", COLOURS["copy"]), ("upload", COLOURS["upload"]),
             ("KV transfer", COLOURS["transfer"]), ("wait", COLOURS["wait"]),
             ("poison", COLOURS["poison"]), ("storage work", COLOURS["storage"]),
             ("request waiting", PHASES["waiting"]), ("running", PHASES["running"]),
             ("offloaded", PHASES["offloaded"])]
    for name, colour in items:
        out.append(f'<rect x="{lx}" y="{legend_top}" width="12" height="10" fill="{colour}" '
                   f'stroke="#555" stroke-width="0.3"/>')
        out.append(f'<text x="{lx + 16}" y="{legend_top + 9}">{esc(name)}</text>')
        lx += 16 + 7 * len(name) + 14
    out.append(f'<line x1="{lx}" x2="{lx + 12}" y1="{legend_top + 5}" y2="{legend_top + 5}" '
               f'stroke="#756bb1" marker-end="url(#a)"/>')
    out.append(f'<text x="{lx + 16}" y="{legend_top + 9}">event recorded → wait released</text>')
    out.append(f'<text x="4" y="{legend_top + 28}">orange dot: a fault fired; red line: the '
               f'violation. Hover a box for its arguments.</text>')
    out.append("</svg>")
    open(a.out, "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
