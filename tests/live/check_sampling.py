"""check_sampling.py DOM NATIVE.json [bad]: the GPT live page's sampling
chart (src/viz/sampling_js.c) in a DOM dumped by chromium, against the
native `gpt sample --json` data for the same prompt and options.

  - the rows are the 12 most probable characters of the native "before",
    in that order; each row's data-before / data-after within 1e-5 of the
    native numbers (WebAssembly against the native kernels) and equal to
    the numbers of the JSON the page printed (#live-json); each bar's
    width is its probability times 260 px;
  - the summary keeps as many characters as the native "after" has above
    0, fewer than the vocabulary; the sample text is the native one;
  - no message beside a box, no injected element.
With "bad": the page was asked for a top-p that is markup, and for a
script, a 10 KB line, control characters with invalid UTF-8 and emoji in
the other boxes: each box's message is beside it as text (at most 20 of
the characters given), no run was made (#live-json is empty), and no
element came from them."""
import html
import json
import re
import sys

dom = open(sys.argv[1], encoding="utf-8").read()
bad = len(sys.argv) > 3 and sys.argv[3] == "bad"
section = re.search(r'<div id="sampling">(.*?)</table>|<div id="sampling">(.*?)<div id="sampling-chart">', dom, re.S)
fails = []
if not section:
    print("FAIL: no sampling section in the page")
    sys.exit(1)
text = section.group(0)
if re.search(r"<(img|script|iframe|svg)\b", text, re.I):
    fails.append("an element was injected into the sampling section")
msgs = {m.group(1): html.unescape(m.group(2)) for m in re.finditer(r'<span class="invalid" id="sampling-([a-z_]+)-msg">(.*?)</span>', text)}
live_json = re.search(r'<pre id="live-json" hidden="">(.*?)</pre>', dom, re.S)
if bad:
    want = 'a number above 0 and at most 1, please (not "<img src=x onerror=a")'  # its first 20 characters
    if msgs.get("top_p") != want:
        fails.append("top-p message %r, want %r" % (msgs.get("top_p"), want))
    # the other boxes, given a script, a 10 KB line, control characters, invalid UTF-8 and emoji
    for key in ("temperature", "top_k", "seed"):
        m = msgs.get(key, "")
        if not re.match(r"a (whole )?number .*, please \(not \".{1,60}\"\)$", m) or len(m) > 140:
            fails.append("%s: message %r" % (key, m))
    if live_json and live_json.group(1).strip():
        fails.append("the page ran the program with a bad top-p")
    print("  hostile boxes: %s beside them, no run, no element injected" % sorted(msgs.items()))
    print("FAIL: " + "; ".join(fails) if fails else "ok")
    sys.exit(1 if fails else 0)
native = json.load(open(sys.argv[2]))["inputs"][0]
s = native["sampling"]
page = json.loads(html.unescape(live_json.group(1)))["inputs"][0]["sampling"] if live_json else None
if any(msgs.values()):
    fails.append("messages: %s" % msgs)
rows = re.findall(r'<tr class="srow[^"]*"[^>]*data-token="(\d+)" data-before="([^"]+)" data-after="([^"]+)"><td>(.*?)</td>'
                  r'<td><span class="sbar" style="[^"]*width:([0-9.]+)px"></span>[^<]*</td>'
                  r'<td><span class="sbar" style="[^"]*width:([0-9.]+)px"></span>', text)
order = sorted(range(len(s["before"])), key=lambda v: (-s["before"][v], v))[:12]
if [int(r[0]) for r in rows] != order:
    fails.append("rows %s, want the native order %s" % ([int(r[0]) for r in rows], order))
worst = 0
for tok, b, a, label, wb, wa in rows:
    v, b, a = int(tok), float(b), float(a)
    worst = max(worst, abs(b - s["before"][v]), abs(a - s["after"][v]))
    if page and (b != page["before"][v] or a != page["after"][v]):
        fails.append("row %d is not the page's JSON" % v)
    if html.unescape(label) != s["tokens"][v]:
        fails.append("row %d labelled %r, want %r" % (v, label, s["tokens"][v]))
    if abs(float(wb) - 260 * b) > 0.06 or abs(float(wa) - 260 * a) > 0.06:
        fails.append("row %d: bars %s / %s px for p %g / %g" % (v, wb, wa, b, a))
if worst > 1e-5:
    fails.append("probabilities differ from native by %.2g" % worst)
kept = sum(1 for p in s["after"] if p > 0)
m = re.search(r'id="sampling-summary" data-kept="(\d+)"', text)
if not m or int(m.group(1)) != kept or not kept < len(s["tokens"]):
    fails.append("kept %s, native %d of %d" % (m and m.group(1), kept, len(s["tokens"])))
said = re.search(r'<span id="said-text">(.*?)</span></p>', dom, re.S)
got_text = re.sub(r"<[^>]+>", "", said.group(1)) if said else None
if got_text is None or html.unescape(got_text) != native["prompt"] + native["sample"]:
    fails.append("sample %r, native %r" % (got_text, native["prompt"] + native["sample"]))
print("  %d bars, temperature %g, top-k %d, top-p %g: %d of %d characters kept, max |page - native| %.1e, %s drawn" %
      (len(rows), s["temperature"], s["top_k"], s["top_p"], kept, len(s["tokens"]), worst,
       repr(s["tokens"][s["drawn"]]) if s["drawn"] >= 0 else "none"))
print("FAIL: " + "; ".join(fails[:5]) if fails else "ok")
sys.exit(1 if fails else 0)
