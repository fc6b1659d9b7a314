"""check_live.py: what a live page computed in headless chromium against the
native program's JSON for the same request (tests/live/test_live.sh).

  check_live.py attention DOM NATIVE.json   a typed sentence (translate run)
                                            or prompt (gpt sample)
  check_live.py backward DOM NATIVE.json    a mask edit and training steps
                                            (backward_tour)
  check_live.py state DOM                   what the page says beside its
                                            controls: prints error=, stale=,
                                            steps=, messages=, note= lines

DOM is what chromium --dump-dom printed once the page's script had run the
program (compiled to WebAssembly) on the URL's request: the JSON the
program printed in the page is in <pre id="live-json">, and the explorer's
drawing of it in the DOM.  Every number must be the native one within
1e-5 (the page's libm is wasi-libc's, not glibc's: the last bits of an exp
may differ), every string, shape and flag the same; then the drawing must
show the page's numbers.  Prints one line per check passed; exit 1 at the
first one that fails.  Python's standard library only."""
import html
import json
import re
import sys

TOL = 1e-5


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def ok(msg):
    print("ok: " + msg)


def same(a, b, where, worst):
    """a (page) equals b (native): numbers within TOL, the rest exactly.
    worst[0] keeps the largest difference seen."""
    if isinstance(b, bool) or b is None or isinstance(b, str):
        if a != b:
            fail("%s: page %r, native %r" % (where, a, b))
    elif isinstance(b, (int, float)):
        if not isinstance(a, (int, float)) or isinstance(a, bool):
            fail("%s: page %r, native %r" % (where, a, b))
        d = abs(a - b)
        worst[0] = max(worst[0], d)
        if not d <= TOL:
            fail("%s: page %.9g, native %.9g (difference %.3g > %g)" % (where, a, b, d, TOL))
    elif isinstance(b, list):
        if not isinstance(a, list) or len(a) != len(b):
            fail("%s: page has %s items, native %d" % (where, len(a) if isinstance(a, list) else "no", len(b)))
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, "%s[%d]" % (where, i), worst)
    elif isinstance(b, dict):
        if not isinstance(a, dict) or sorted(a) != sorted(b):
            fail("%s: page keys %s, native %s" % (where, sorted(a) if isinstance(a, dict) else a, sorted(b)))
        for k in b:
            same(a[k], b[k], where + "." + k, worst)


def attrs_of(dom, pattern):
    """The attribute dicts of the start tags matching pattern (a regex of
    the tag's text)."""
    out = []
    for m in re.finditer(pattern, dom):
        out.append({k: html.unescape(v) for k, v in re.findall(r'([\w-]+)="([^"]*)"', m.group(0))})
    return out


def numbers_close(shown, want, what):
    if len(shown) != len(want):
        fail("%s: %d cells drawn, %d in the JSON" % (what, len(shown), len(want)))
    for i, (s, w) in enumerate(zip(shown, want)):
        if float(s) != float(w):
            fail("%s: cell %d drawn %s, the JSON holds %r" % (what, i, s, w))


def state(dom):
    """What the live page says (outside its scripts): the error line, the
    stale mark, the messages beside the controls, the steps and the note of
    the JSON it shows."""
    body = re.sub(r"<script.*?</script>", "", dom, flags=re.S)
    def text(id_):
        m = re.search(r'<[a-z]+ id="%s"[^>]*>(.*?)</[a-z]+>' % id_, body, re.S)
        return html.unescape(re.sub(r"<[^>]*>", "", m.group(1))) if m else None
    m = re.search(r'<pre id="live-json" hidden="">(.*?)</pre>', body, re.S)
    page = json.loads(html.unescape(m.group(1))) if m and m.group(1).strip() else {}
    stale = re.search(r'<p id="live-stale"( hidden="")?>', body)
    print("error=%s" % json.dumps(text("live-error")))
    print("stale=%d" % (1 if stale and not stale.group(1) and 'class="live-stale"' in body else 0))
    print("messages=%s" % json.dumps([html.unescape(x) for x in re.findall(r'<span class="invalid" id="[^"]*">([^<]+)</span>', body)]))
    print("steps=%s" % page.get("steps"))
    print("note=%s" % json.dumps(page.get("note", "")))


def main():
    if sys.argv[1] == "state":
        return state(open(sys.argv[2], encoding="utf-8").read())
    mode, dom_path, native_path = sys.argv[1:4]
    dom = open(dom_path, encoding="utf-8").read()
    if 'data-live="1"' not in dom:
        fail("the page did not finish its run (data-live is not 1)")
    m = re.search(r'<pre id="live-json" hidden="">(.*?)</pre>', dom, re.S)
    if not m or not m.group(1).strip():
        fail("no JSON from the program in the page (#live-json)")
    page = json.loads(html.unescape(m.group(1)))
    native = json.load(open(native_path, encoding="utf-8"))
    worst = [0.0]
    same(page, native, "json", worst)
    ok("%s: every number the native program's within %g (largest difference %.2g), every label and flag the same"
       % (mode, TOL, worst[0]))
    if mode == "attention":
        inp = page["inputs"][0]
        said = " -> %r" % " ".join(inp["translation"]) if "translation" in inp else ""
        ok("input %r%s: %d attention maps recomputed" % (inp["name"], said, len(inp["maps"])))
        # the explorer redrew the first map, head 0, query 0 from the page's numbers
        rows = attrs_of(dom, r'<tr data-key="\d+" data-masked="\d" data-score="[^"]*" data-weight="[^"]*">')
        m0 = inp["maps"][0]
        numbers_close([r["data-weight"] for r in rows], m0["heads"][0]["weights"][0], "the #row table")
        ok("the explorer draws the page's weights (%s, row %r)" % (m0["name"], m0["rows"][0]))
    else:
        if not all(p["ok"] for p in page["panels"]):
            fail("a gradient check failed in the page: " + ", ".join(p["name"] for p in page["panels"] if not p["ok"]))
        ok("P, dP, dS, dQ, dK, dV: every finite-difference and by-hand check ok in the page")
        ok("%d training steps: losses %s" % (page["steps"], " ".join("%.6f" % x for x in page["losses"])))
        # each panel's cells, in its div (the page groups the panels)
        parts = re.split(r'(?=<div class="panel[^"]*" id="panel-\d+")', dom)
        for i, p in enumerate(page["panels"]):
            part = next((x for x in parts if x.startswith('<div class="panel') and 'id="panel-%d"' % i in x[:80]), None)
            if part is None:
                fail("panel %s is not drawn" % p["name"])
            cells = attrs_of(part.split("</table>")[0], r'<td [^>]*data-row="\d+" data-col="\d+" data-value="[^"]*"')
            numbers_close([c["data-value"] for c in cells], [x for r in p["values"] for x in r], "panel " + p["name"])
        mask = attrs_of(dom, r'<td class="(?:on|off)[^"]*" data-row="\d+" data-col="\d+"')
        if [1 if c["class"].startswith("on") else 0 for c in mask] != [x for r in page["mask"] for x in r]:
            fail("the mask drawn is not the mask the program used")
        if len(re.findall(r"<circle[^>]*>\s*<title>loss \d+:", dom)) != page["steps"]:
            fail("the loss curve does not have %d points" % page["steps"])
        ok("the explorer draws the page's panels, its mask and a loss curve of %d points" % page["steps"])


main()
