"""check_page.py: what a headless browser shows of an explorer page against
the numbers the program wrote into it (tests/explorer/test_explorer.sh).

  check_page.py attention PAGE DOM SENTENCE ATTN LAYER HEAD TOKEN [SVG]
  check_page.py embeddings PAGE DOM SENTENCE EMB [MODEL.safetensors]
  check_page.py ffn PAGE DOM SENTENCE FFN
  check_page.py output PAGE DOM SENTENCE [translation FILE | greedy TEXT_FILE PROMPT_LEN]
  check_page.py scroll PAGE DOM       (a page with scroll_probe.js put in)
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
import struct
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
    # one colour scale for every head of the layer: 0 to the largest unmasked weight
    legend(elems, "legend", 0.0, max(w for x in m["heads"] for r, row in enumerate(x["weights"]) for c, w in enumerate(row)
                                      if m["mask"] is None or m["mask"][r][c]), "the layer's heads")
    for i in range(len(m["heads"])):
        by_id(elems, "head-%d" % i)
    ok("every head of the layer drawn (%d)" % len(m["heads"]))
    hatched(elems, "heatmap", m["mask"], len(m["rows"]), len(m["cols"]))
    colours(elems, "heatmap", "dark-bright")
    after = [e["text"] for e in elems if e["tag"] == "td" and "heatmap" in e["in"] and e["attrs"].get("class") == "after"]
    out = data["inputs"][int(sentence)].get("output")
    if attn == "encoder":
        if after:
            fail("the encoder's rows say what they predict: %s" % after)
        ok("encoder rows predict nothing (no column)")
    else:
        want = [n if n is not None else "(%s?)" % out["top"][r][0]["token"] for r, n in enumerate(out["next"])]
        if after != want:
            fail("row t predicts %s, the program's next tokens are %s" % (after, want))
        ok("row t predicts token t+1: %s" % " ".join(after))
    if svg:  # the same weights in `translate run --attention`'s SVG (%.4g)
        vals = re.findall(r'": ([-+0-9.e]+)(?: \(masked\))?</title>', open(svg, encoding="utf-8").read())
        T, S = len(m["rows"]), len(m["cols"])
        got = [float(v) for v in vals[(int(head) * T + t) * S:(int(head) * T + t + 1) * S]]
        if len(got) != S or not all(abs(a - b) <= 5e-4 * abs(b) + 1e-12 for a, b in zip(got, h["weights"][t])):
            fail("the SVG's row %s, the page's %s" % (got, h["weights"][t]))
        ok("the same row as the SVG heatmap of the same run (%s)" % svg.split("/")[-1])



def legend(elems, ident, lo, hi, what):
    """The legend ident exists and its range is [lo, hi], the data's."""
    a = by_id(elems, ident)["attrs"]
    if float(a["data-lo"]) != lo or float(a["data-hi"]) != hi:
        fail("legend %s: [%s, %s], the data's range is [%r, %r]" % (ident, a["data-lo"], a["data-hi"], lo, hi))
    ok("legend %s: [%.4g, %.4g], the range of %s" % (ident, lo, hi, what))


def hatched(elems, ident, mask, R, C, where=None):
    """Cells of the heatmap ident (or those inside where) drawn masked exactly where mask is 0."""
    cells = [e for e in elems if e["tag"] == "td" and (where or ident) in e["in"] and "data-col" in e["attrs"]]
    if len(cells) != R * C:
        fail("%s: %d cells for %d x %d" % (ident, len(cells), R, C))
    n = 0
    for e in cells:
        r, c = int(e["attrs"]["data-row"]), int(e["attrs"]["data-col"])
        want = mask is not None and mask[r][c] == 0
        got = e["attrs"].get("class") == "masked" and e["attrs"].get("data-masked") == "1"
        if want != got:
            fail("%s cell (%d, %d): drawn %s, the mask says %s" % (ident, r, c, "masked" if got else "plain", want))
        n += want
    ok("%s: %d cells masked (hatched) where the mask is 0, no other" % (ident, n))


def colours(elems, ident, kind):
    """The cells of heatmap ident coloured as docs/explorer.md says, on the
    scale of the legend: weights (kind "dark-bright") dark at 0, never
    darker for a larger weight, bright at the legend's top; the rest
    ("blue-red") blue below 0, white at 0, red above, deeper as |value|
    nears the legend's bound."""
    cells = []
    for e in elems:
        a = e["attrs"]
        m = re.search(r"background:rgb\((\d+),(\d+),(\d+)\)", a.get("style", ""))
        if e["tag"] == "td" and ident in e["in"] and m:  # the value: data-value, or the title's "row -> col: x"
            cells.append((float(a.get("data-value") or a["title"].rsplit(": ", 1)[1]), tuple(int(x) for x in m.groups())))
    if len(cells) < 2:
        fail("%s: %d coloured cells" % (ident, len(cells)))
    lum = lambda c: 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]
    hi = float(by_id(elems, "legend")["attrs"]["data-hi"])
    cells.sort()
    for i, (v, c) in enumerate(cells):
        if kind == "dark-bright":
            if (v == 0 and lum(c) > 40) or (v == hi and lum(c) < 200):
                fail("%s: weight %r drawn %s: not dark at 0, bright at the top %r" % (ident, v, c, hi))
            if i and lum(c) < lum(cells[i - 1][1]) - 2:
                fail("%s: weight %r drawn darker (%s) than %r (%s)" % (ident, v, c, cells[i - 1][0], cells[i - 1][1]))
        else:
            white = 255 - round(255 * min(1, abs(v) / hi))
            want = (255, white, white) if v >= 0 else (white, white, 255)
            if any(abs(x - y) > 1 for x, y in zip(c, want)):
                fail("%s: %r drawn %s, blue-white-red on [-%g, %g] wants %s" % (ident, v, c, hi, hi, want))
    ok("%s: %d cells, %s" % (ident, len(cells), "dark (0) to bright (the largest), brighter as the weight grows"
       if kind == "dark-bright" else "blue (< 0), white (0), red (> 0), deeper as |value| grows"))


def cells_of(elems, ident):
    """The values of heatmap ident's cells, as rows."""
    rows = {}
    for e in elems:
        if e["tag"] == "td" and ident in e["in"] and "data-value" in e["attrs"]:
            rows.setdefault(int(e["attrs"]["data-row"]), []).append(float(e["attrs"]["data-value"]))
    return [rows[r] for r in sorted(rows)]


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def safetensors(path):
    """name -> (shape, flat values) of a float32 safetensors file, and its metadata."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head, out = json.loads(raw[8:8 + n]), {}
    for k, v in head.items():
        if k == "__metadata__" or v["dtype"] != "F32":
            continue
        a, b = v["data_offsets"]
        out[k] = (v["shape"], struct.unpack("<%df" % ((b - a) // 4), raw[8 + n + a:8 + n + b]))
    return out, head.get("__metadata__", {})


def selected_view(elems, view):
    got = by_id(elems, "view")["attrs"].get("data-view")
    if got != view:
        fail("the page shows view %s, asked for %s" % (got, view))


def embeddings(page, dom_path, sentence, emb, model=None):
    data, elems = page_json(page), dom(dom_path)
    selected_view(elems, "embeddings")
    e = data["inputs"][int(sentence)]["embeddings"][int(emb)]
    for part in ("token", "position", "sum"):
        if cells_of(elems, "emb-" + part) != e[part]:
            fail("%s: the page's cells differ from the program's" % part)
    T, C = len(e["rows"]), len(e["sum"][0])
    ok("%s: token, position and sum, %d tokens x %d dimensions, every cell the program's" % (e["name"], T, C))
    for t in range(T):
        for c in range(C):
            a, b, s = e["token"][t][c], e["position"][t][c], e["sum"][t][c]
            if abs(s - (a + b)) > 1.2e-7 * (abs(a) + abs(b)):
                fail("x[%d, %d] = %r, token + position = %r" % (t, c, s, a + b))
    ok("x = token + position in every cell (to float rounding)")
    colours(elems, "emb-sum", "blue-red")
    hi = max(abs(x) for part in ("token", "position", "sum") for r in e[part] for x in r)
    legend(elems, "legend", -hi, hi, "the three grids")
    for i in range(T):  # the same token, the same row
        for j in range(T):
            if (e["rows"][i] == e["rows"][j]) != (e["token"][i] == e["token"][j]):
                fail("tokens %d %r and %d %r: rows equal %s" % (i, e["rows"][i], j, e["rows"][j], e["token"][i] == e["token"][j]))
    ok("token rows: equal for the same token, different for different ones")
    if model:  # the GPT's tables, rows as the file has them (%.9g in the page: equal once rounded to float)
        tables, meta = safetensors(model)
        vocab = [int(b) for b in meta["vocab"].split(",")]
        byte = {"\u2423": 32, "\\n": 10}
        ids = [vocab.index(byte.get(x, int(x, 16) if x.startswith("0x") else ord(x))) for x in e["rows"]]
        for part, name, row in (("token", "embedding.tokens.weight", ids), ("position", "embedding.positions.weight", range(T))):
            flat = tables[name][1]
            if any([f32(x) for x in e[part][t]] != list(flat[r * C:(r + 1) * C]) for t, r in enumerate(row)):
                fail("the %s rows are not those of %s's %s" % (part, model, name))
        ok("token rows: the model file's embedding.tokens.weight at each character's id; positions: rows 0..%d of "
           "embedding.positions.weight" % (T - 1))
    else:  # the translator's: sin and cos of t / 10000^(2i / C)
        for t in range(T):
            for c in range(C):
                a = t / 10000 ** ((c - c % 2) / C)
                if abs(e["position"][t][c] - (math.sin(a) if c % 2 == 0 else math.cos(a))) > 1e-6:
                    fail("position (%d, %d) = %r" % (t, c, e["position"][t][c]))
        ok("positions: sin and cos of t / 10000^(2i/C), as the tour derives")


def ffn(page, dom_path, sentence, which):
    data, elems = page_json(page), dom(dom_path)
    selected_view(elems, "ffn")
    f = data["inputs"][int(sentence)]["ffn"][int(which)]
    if cells_of(elems, "ffn-map") != f["values"]:
        fail("%s: the page's cells differ from the program's" % f["name"])
    ok("%s: %d tokens x %d hidden units, every cell the program's" % (f["name"], len(f["values"]), len(f["values"][0])))
    hi = max(abs(x) for r in f["values"] for x in r)
    legend(elems, "legend", 0.0 if f["activation"] == "relu" else -hi, hi, "the layer's units")
    low = min(x for r in f["values"] for x in r)
    floor = {"relu": 0.0, "gelu": -0.17, "gelu_tanh": -0.17}[f["activation"]]
    if low < floor:
        fail("%s gives %r, below its least value %r" % (f["activation"], low, floor))
    ok("every value >= %g, %s's least value (lowest %.4g)" % (floor, f["activation"], low))
    counts = [e["text"] for e in elems if e["tag"] == "td" and "ffn-map" in e["in"] and e["attrs"].get("class") == "after"]
    if counts != [str(sum(x > 0 for x in r)) for r in f["values"]]:
        fail("units above 0 per token: page %s" % counts)
    ok("units above 0 per token: %s" % " ".join(counts))


def output(page, dom_path, sentence, side=None, path=None, prompt=None):
    data, elems = page_json(page), dom(dom_path)
    selected_view(elems, "output")
    o = data["inputs"][int(sentence)]["output"]
    rows = [e for e in elems if e["tag"] == "tr" and "output" in e["in"] and "data-row" in e["attrs"]]
    if len(rows) != len(o["rows"]):
        fail("%d rows in #output, the program's %d" % (len(rows), len(o["rows"])))
    for t, top in enumerate(o["top"]):
        bars = [e["attrs"] for e in elems if e["tag"] == "span" and "data-rank" in e["attrs"] and "output" in e["in"]][5 * t:5 * t + 5]
        if [(b["data-token"], float(b["data-p"])) for b in bars] != [(x["token"], x["p"]) for x in top]:
            fail("row %d: the page's top 5 %s, the program's %s" % (t, bars, top))
        if any(top[k]["p"] < top[k + 1]["p"] for k in range(len(top) - 1)) or sum(x["p"] for x in top) > 1 + 1e-6:
            fail("row %d: top 5 not in order or above 1: %s" % (t, top))
        for x in top:  # the native softmax, against the logits
            if abs(x["p"] - math.exp(x["logit"] - o["lse"][t])) > 2e-6 * x["p"] + 1e-9:
                fail("row %d: p(%s) = %r, exp(logit - lse) = %r" % (t, x["token"], x["p"], math.exp(x["logit"] - o["lse"][t])))
        if o["next"][t] is not None and not o["next_p"][t] <= top[0]["p"]:
            fail("row %d: the next token has p %r above the top's %r" % (t, o["next_p"][t], top[0]["p"]))
    ok("%d positions: the top 5 as the program wrote them, in order, p = exp(logit - logsumexp) (softmax)" % len(rows))
    tops = [top[0]["token"] for top in o["top"]]
    if side == "translation":  # greedy decoding printed these words: row t's top is word t, then <eos>
        words = open(path, encoding="utf-8").read().split("\n")[int(sentence)].split()
        want = words + ["<eos>"]
        if tops != want[:len(tops)]:
            fail("the top tokens %s, the translation printed %s" % (tops, want))
        ok("row t's likeliest token is the printed translation's word t, then <eos>: %s" % " ".join(tops))
    elif side == "greedy":  # sampled at temperature 0: each new character was the top one
        text, n = open(path, encoding="utf-8").read(), int(prompt)
        if len(text) == len(tops) + 1 and text.endswith("\n"):  # the newline sample ends its output with
            text = text[:-1]
        label = {" ": "\u2423", "\n": "\\n"}
        want = [label.get(ch, ch) for ch in text[1:]]
        if len(text) != len(tops) or tops[n - 1:-1] != want[n - 1:]:
            fail("the top characters %s, greedy sampling wrote %s" % (tops[n - 1:-1], want[n - 1:]))
        ok("row t's likeliest character is the one greedy sampling wrote after it (%d rows)" % (len(tops) - n))


def scroll(page, dom_path):
    """A grid too big for its frame (32 tokens), scrolled to its end by
    scroll_probe.js: it scrolled inside its frame, its labels stayed in
    view (sticky), the numbers beside it are in the window, the page is no
    wider than the window."""
    body = [e for e in dom(dom_path) if e["tag"] == "body"][0]["attrs"]
    p = json.loads(body["data-probe"])
    frame, col, label, nums = p["frame"], p["col"], p["label"], p["numbers"]
    if not (p["scrolled"][0] > 0 and p["scrolled"][1] > 0):
        fail("the grid did not scroll inside its frame: %s" % p)
    if abs(col[1] - frame[1]) > 2 or abs(label[0] - frame[0]) > 2:
        fail("scrolled to the end, the labels left the frame: column label at y %g (frame %g), row label at x %g "
             "(frame %g)" % (col[1], frame[1], label[0], frame[0]))
    ok("the grid scrolls inside its frame (by %d, %d px); its column and row labels stay in view" % tuple(p["scrolled"]))
    if nums[0] < frame[2] or nums[2] > p["window"][0] or nums[1] > p["window"][1] or p["page"] > p["window"][0]:
        fail("the numbers at %s, the grid's frame %s, the window %s, the page %d px wide" % (nums, frame, p["window"], p["page"]))
    ok("the row's numbers beside the grid, in the window (x %d..%d, y %d); the page fits its width" % (nums[0], nums[2], nums[1]))

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
    mask = data["panels"][0]["mask"]
    for i, p in enumerate(data["panels"]):
        labels = [e["text"] for e in elems if e["tag"] == "th" and "panel-%d" % i in e["in"] and e["attrs"].get("class") == "rowlab"]
        if labels != p["rows"] or len(labels) != len(p["values"]):
            fail("panel %s: row labels %s" % (p["name"], labels))
        hatched(elems, p["name"], p["mask"], len(p["values"]), len(p["values"][0]), "panel-%d" % i)
    if not mask or any(data["panels"][i]["mask"] != mask for i in (1, 2)):
        fail("P, dP and dS do not carry the causal mask")
    groups = [["P"], ["dP", "dS"], ["dQ", "dK", "dV"]]
    for g, names in enumerate(groups):
        ps = [p for p in data["panels"] if p["name"] in names]
        if len({e["attrs"]["data-scale"] for e in panels if e["attrs"]["data-name"] in names}) != 1:
            fail("panels %s do not share one scale" % names)
        xs = [x for p in ps for r, row in enumerate(p["values"]) for c, x in enumerate(row) if not p["mask"] or p["mask"][r][c]]
        if names == ["P"]:
            legend(elems, "legend-0", 0.0, max(xs), "P")
        else:
            legend(elems, "legend-%d" % g, -max(abs(x) for x in xs), max(abs(x) for x in xs), " ".join(names))
    ok("rows labelled by token; one scale for P, one for dP and dS, one for dQ dK dV")
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
    {"attention": attention, "embeddings": embeddings, "ffn": ffn, "output": output, "scroll": scroll,
     "backward": backward, "training": training}[sys.argv[1]](*sys.argv[2:])
