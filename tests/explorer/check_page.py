"""check_page.py: what a headless browser shows of an explorer page against
the numbers the program wrote into it (tests/explorer/test_explorer.sh).

  check_page.py attention PAGE DOM SENTENCE ATTN LAYER HEAD TOKEN [SVG]
  check_page.py backward PAGE DOM PANEL
  check_page.py training PAGE DOM EPOCH [SIDE.json translate|gpt]

PAGE is the file the program wrote (its JSON is read from
<script id="data">), DOM what chromium --dump-dom printed after the page's
script ran with the selection in the URL.  Prints one line per check
passed; exit 1 at the first one that fails.  Python's standard library
only."""
import html.parser
import json
import math
import re
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def ok(msg):
    print("ok: " + msg)


def page_json(path):
    text = open(path, encoding="utf-8").read()
    m = re.search(r'<script type="application/json" id="data">\n(.*?)\n</script>', text, re.S)
    if not m:
        fail(path + ": no data block")
    return json.loads(m.group(1))


class Dom(html.parser.HTMLParser):
    """Every element's tag, attributes, text and the ids of its ancestors."""

    def __init__(self):
        super().__init__()
        self.stack, self.elems = [], []

    def handle_starttag(self, tag, attrs):
        e = {"tag": tag, "attrs": dict(attrs), "text": "", "in": [x["attrs"].get("id") for x in self.stack]}
        self.elems.append(e)
        if tag not in ("meta", "br", "input", "line", "circle", "rect", "polyline"):
            self.stack.append(e)

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()["tag"] == tag:
                break

    def handle_data(self, data):
        for e in self.stack:
            e["text"] += data


def dom(path):
    d = Dom()
    d.feed(open(path, encoding="utf-8").read())
    return d.elems


def by_id(elems, ident):
    hits = [e for e in elems if e["attrs"].get("id") == ident]
    if len(hits) != 1:
        fail("%d elements with id %s in the DOM" % (len(hits), ident))
    return hits[0]


def inside(elems, ident, tag, attr):
    return [e for e in elems if e["tag"] == tag and ident in e["in"] and attr in e["attrs"]]


def close(a, b, rel):
    return abs(a - b) <= rel * (1 + abs(b))


def attention(page, dom_path, sentence, attn, layer, head, token, svg=None):
    data, elems = page_json(page), dom(dom_path)
    sel = by_id(elems, "selected")["attrs"]
    want = {"data-sentence": sentence, "data-attn": attn, "data-layer": layer, "data-head": head, "data-token": token}
    if any(sel.get(k) != v for k, v in want.items()):
        fail("selected %s, asked for %s" % (sel, want))
    ok("the page shows %s layer %s head %s token %s" % (attn, layer, head, token))
    m = [x for x in data["inputs"][int(sentence)]["maps"] if x["kind"] == attn][int(layer)]
    h, t = m["heads"][int(head)], int(token)
    rows = inside(elems, "row", "tr", "data-key")
    if len(rows) != len(m["cols"]):
        fail("%d keys in #row, the map has %d" % (len(rows), len(m["cols"])))
    masked = 0
    for j, r in enumerate(rows):
        a = r["attrs"]
        is_masked = m["mask"] is not None and m["mask"][t][j] == 0
        if a["data-masked"] != ("1" if is_masked else "0"):
            fail("key %d: masked %s, the program's mask says %s" % (j, a["data-masked"], is_masked))
        if float(a["data-weight"]) != h["weights"][t][j]:
            fail("key %d: weight %s on the page, %r in the program's JSON" % (j, a["data-weight"], h["weights"][t][j]))
        if is_masked:
            masked += 1
            if h["weights"][t][j] != 0 or "masked" not in r["text"]:
                fail("key %d is masked: weight %r, shown %r" % (j, h["weights"][t][j], r["text"]))
        elif float(a["data-score"]) != h["scores"][t][j]:
            fail("key %d: score %s on the page, %r in the JSON" % (j, a["data-score"], h["scores"][t][j]))
    ok("the row's %d weights and scores are the program's, %d keys masked" % (len(rows), masked))
    # the scores' softmax is the row (the page's numbers make sense)
    z = [h["scores"][t][j] for j in range(len(rows)) if rows[j]["attrs"]["data-masked"] == "0"]
    mx = max(z)
    tot = sum(math.exp(v - mx) for v in z)
    p = [math.exp(v - mx) / tot for v in z]
    w = [h["weights"][t][j] for j in range(len(rows)) if rows[j]["attrs"]["data-masked"] == "0"]
    if not all(close(a, b, 2e-6) for a, b in zip(p, w)):
        fail("softmax(scores) %s differs from the weights %s" % (p, w))
    ok("softmax of the row's scores gives its weights")
    # the neuron view: sum_d q[d] k[d] (the page's sum) times the scale is the graph's score
    prods = inside(elems, "neuron", "tr", "data-sum")
    if len(prods) != len(rows):
        fail("%d products in the neuron view for %d keys" % (len(prods), len(rows)))
    for j, r in enumerate(prods):
        s = float(r["attrs"]["data-sum"])
        want_sum = sum(a * b for a, b in zip(h["q"][t], h["k"][j]))
        if not close(s, want_sum, 1e-12):
            fail("key %d: the page's sum %r, q.k %r" % (j, s, want_sum))
        if r["attrs"]["data-masked"] == "0" and not close(s * m["scale"], h["scores"][t][j], 2e-5):
            fail("key %d: scale * q.k = %r but the model's score is %r" % (j, s * m["scale"], h["scores"][t][j]))
    ok("neuron view: scale * sum_d q[d] k[d] is the model's score for each of %d keys" % len(prods))
    labels = [e["text"] for e in elems if e["tag"] == "th" and "heatmap" in e["in"] and "col" in e["attrs"].get("class", "")]
    if labels != m["cols"]:
        fail("heatmap columns %s, the map's keys %s" % (labels, m["cols"]))
    ok("heatmap columns: %s" % " ".join(labels))
    if svg:  # the same weights in `translate run --attention`'s SVG (%.4g)
        vals = re.findall(r'": ([-+0-9.e]+)(?: \(masked\))?</title>', open(svg, encoding="utf-8").read())
        T, S = len(m["rows"]), len(m["cols"])
        got = [float(v) for v in vals[(int(head) * T + t) * S:(int(head) * T + t + 1) * S]]
        if len(got) != S or not all(abs(a - b) <= 5e-4 * abs(b) + 1e-12 for a, b in zip(got, h["weights"][t])):
            fail("the SVG's row %s, the page's %s" % (got, h["weights"][t]))
        ok("the same row as the SVG heatmap of the same run (%s)" % svg.split("/")[-1])


def backward(page, dom_path, panel):
    data, elems = page_json(page), dom(dom_path)
    panels = [e for e in elems if e["tag"] == "div" and "data-ok" in e["attrs"]]
    names = [e["attrs"]["data-name"] for e in panels]
    if names != ["P", "dP", "dS", "dQ", "dK", "dV"]:
        fail("panels %s" % names)
    if any(e["attrs"]["data-ok"] != "1" for e in panels):
        fail("a panel's check failed: %s" % [e["attrs"]["data-ok"] for e in panels])
    ok("six panels P dP dS dQ dK dV, every check ok")
    for i, p in enumerate(data["panels"]):
        cells = inside(elems, "panel-%d" % i, "td", "data-value")
        flat = [x for row in p["values"] for x in row]
        if [float(c["attrs"]["data-value"]) for c in cells] != flat:
            fail("panel %s: the page's cells differ from the JSON" % p["name"])
    ok("every cell is the program's number")
    v = {p["name"]: p["values"] for p in data["panels"]}
    for r in range(len(v["P"])):
        dot = sum(a * b for a, b in zip(v["dP"][r], v["P"][r]))
        for c in range(len(v["P"][r])):
            want = v["P"][r][c] * (v["dP"][r][c] - dot)
            if abs(v["dS"][r][c] - want) > 1e-12:
                fail("dS[%d, %d] = %r, P (dP - rowsum(dP P)) = %r" % (r, c, v["dS"][r][c], want))
    ok("dS = P * (dP - rowsum(dP * P)) from the page's own P and dP")
    sel = [e["attrs"]["data-name"] for e in panels if "sel" in e["attrs"]["class"].split()]
    if sel != [panel]:
        fail("selected panels %s, asked for %s" % (sel, panel))
    ok("panel %s selected" % panel)


def training(page, dom_path, epoch, side=None, program=None):
    data, elems = page_json(page), dom(dom_path)
    if by_id(elems, "selected")["attrs"].get("data-epoch") != epoch:
        fail("selected point %s, asked for %s" % (by_id(elems, "selected")["attrs"], epoch))
    cells = inside(elems, "values", "td", "data-series")
    n = max(len(s["y"]) for s in data["series"])
    if len(cells) != n * len(data["series"]):
        fail("%d cells for %d series of %d points" % (len(cells), len(data["series"]), n))
    for i, c in enumerate(cells):
        y = data["series"][i % len(data["series"])]["y"][i // len(data["series"])]
        if (float(c["attrs"]["data-value"]) if c["attrs"]["data-value"] else None) != y:
            fail("cell %d: %s on the page, %r in the JSON" % (i, c["attrs"]["data-value"], y))
    ok("%d series of %d points, every value the program's; point %s selected" % (len(data["series"]), n, epoch))
    if not side:
        return
    report, series = json.load(open(side)), {s["name"]: s["y"] for s in data["series"]}
    if program == "translate":  # entropy per epoch and layer as train --json recorded it (%.6g)
        count = 0
        for ep in report["attention"]:
            for layer in ep["layers"]:
                if ep["epoch"] == 0:
                    continue
                y = series[layer["layer"]][ep["epoch"] - 1]
                if not close(y, layer["entropy"], 1e-5):
                    fail("%s epoch %d: page %r, --json %r" % (layer["layer"], ep["epoch"], y, layer["entropy"]))
                count += 1
        ok("%d entropies (epoch x layer) agree with train --json" % count)
    else:  # held-out loss per evaluation as gpt train --json recorded it (%.6f)
        val = [p["val_loss"] for p in report["history"]]
        if data["x"] != [p["step"] for p in report["history"]] or not all(
                abs(a - b) <= 5.01e-7 for a, b in zip(series["held-out loss"], val)):
            fail("held-out loss %s, --json %s" % (series["held-out loss"], val))
        ok("held-out loss at steps %s agrees with train --json" % data["x"])


if __name__ == "__main__":
    {"attention": attention, "backward": backward, "training": training}[sys.argv[1]](*sys.argv[2:])
