// tests/explorer/glance.js: the model at a glance (src/viz/overview_js.c) on
// an explorer or live page, clicked as a learner clicks it, in Debian's
// chromium driven by puppeteer-core.  Prints one JSON object on stdout:
// {checks: [{ok, what}], console: [...]}; test_glance.sh reads it.
//
//   node glance.js PAGE QUERY [OFF]
//
// Against the page's own JSON (its data block, or what its program printed
// last on a live page), with the page's config:
//   - the overview has one stack per side (encoder and decoder, or one),
//     one block per layer, an attention box per layer and attention kind
//     with one square per head (config.heads), a feed-forward box per layer;
//   - every head square, every model-view thumbnail (config.layers x
//     config.heads for each attention kind) and every box with numbers opens
//     the view it names: the page's #selected says that kind, layer, head
//     (or that feed-forward layer, embedding, the output), and its row of
//     weights is the JSON's for that head;
//   - the head lines: one line per query and key the query may see, each
//     line's weight and opacity the JSON's weight; hovering a token keeps
//     its lines only (the others nearly transparent);
//   - the selected token's path: its chip marked, the red path in its stack;
//   - every layer-norm and residual box opens its view: the grids are the
//     JSON's; a layer norm's mean and std per row, recomputed from its x,
//     are the page's, its normalised rows have mean 0 and variance
//     var/(var + eps), and y = x-hat * gamma + beta; a residual's sum is
//     x + f, post-norm the layer norm of the sum shown after it;
//   - OFF (a head's name, kind:layer:head, switched off when the page was
//     made): that head's thumbnail and square, and only those, marked off.
"use strict";
const puppeteer = require("puppeteer-core");

(async () => {
  const [page, query, off] = process.argv.slice(2);
  const browser = await puppeteer.launch({
    executablePath: "/usr/bin/chromium", headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--proxy-server=127.0.0.1:9", "--window-size=1200,1400"],
  });
  const tab = await browser.newPage();
  const consoleLog = [], checks = [];
  const check = (ok, what) => checks.push({ ok: !!ok, what: what });
  tab.on("console", m => consoleLog.push(m.type() + ": " + m.text()));
  tab.on("pageerror", e => consoleLog.push("pageerror: " + e.message));
  await tab.goto("file://" + page + (query ? "?" + query : ""));
  await tab.waitForFunction(() => document.body.dataset.ready && document.body.dataset.glance && !document.body.dataset.glance_due && (!document.getElementById("live") || document.body.dataset.live), { timeout: 300000 });
  const data = await tab.evaluate(() => data);
  // a live page asked to run: its first computed picture does not wait for the glance, drawn after it
  const times = await tab.evaluate(() => ({ live: !!document.getElementById("live"), done: document.body.dataset.live_done, at: document.body.dataset.glance_at }));
  if (times.live && /live_input=/.test(query || ""))
    check(Number(times.at) >= Number(times.done), "live page: the run's picture done at " + times.done + " ms, the glance drawn after it, at " + times.at + " ms");
  const cfg = data.config;
  check(cfg && cfg.layers > 0 && cfg.heads > 0, "the page's JSON has the model's config: " + JSON.stringify(cfg));
  const input = data.inputs[await tab.evaluate(() => state.input)];
  const kinds = [...new Set(input.maps.map(m => m.kind))];
  const two = kinds.includes("encoder");

  // ---- the overview: its stacks, blocks, heads --------------------------------------
  const ov = await tab.evaluate(() => ({
    bands: [...document.querySelectorAll("#overview .ov-band")].map(b => b.dataset.stack),
    heads: [...document.querySelectorAll("#overview .ov-heads")].map(g => ({ attn: g.dataset.attn, layer: Number(g.dataset.layer), n: g.querySelectorAll(".ov-head").length })),
    ffn: [...document.querySelectorAll('#overview [data-ov="ffn"]')].map(g => g.dataset.open ? JSON.parse(g.dataset.open) : null),
    boxes: [...document.querySelectorAll("#overview [data-ov]")].map(g => g.dataset.ov),
  }));
  check(JSON.stringify(ov.bands) === JSON.stringify(two ? ["encoder", "decoder"] : ["blocks"]),
    "overview: the stacks " + ov.bands.join(", ") + (two ? " (encoder-decoder)" : " (decoder-only)"));
  let boxesOk = ov.heads.length === kinds.length * cfg.layers;
  kinds.forEach(k => {
    check(input.maps.filter(m => m.kind === k).length === cfg.layers && input.maps.every(m => m.heads.length === cfg.heads),
      "the JSON's " + k + " maps: " + cfg.layers + " layers of " + cfg.heads + " heads, as its config says");
    for (let l = 0; l < cfg.layers; l++) {
      const g = ov.heads.filter(x => x.attn === k && x.layer === l);
      boxesOk = boxesOk && g.length === 1 && g[0].n === cfg.heads;
    }
  });
  check(boxesOk, "overview: one attention box per layer and kind (" + ov.heads.length + "), " + cfg.heads + " head squares each");
  const stacks = two ? 2 : 1, residual = cfg.residual === undefined || !!cfg.residual;
  check(ov.ffn.length === (cfg.ffn ? cfg.layers * stacks : 0), "overview: a feed-forward box per block (" + ov.ffn.length + ", F = " + cfg.ffn + ")");
  const want = ["tokens", "emb", "pos", "qkv", "out", "probs"].concat(residual ? ["add"] : [], cfg.ffn ? ["ffn"] : [], cfg.pre_norm ? ["ln"] : []);
  check(want.every(b => ov.boxes.includes(b)) && (residual || !ov.boxes.includes("add")), "overview: " + want.join(", ") + " drawn" +
    (residual ? "" : ", no residual add"));
  const count = b => ov.boxes.filter(x => x === b).length;
  check(count("ln") === (cfg.pre_norm ? kinds.length * cfg.layers + (cfg.ffn ? cfg.layers * stacks : 0) + stacks : 0),
    "overview: " + (cfg.pre_norm ? "a layer norm before each attention and FFN, and a final one per stack" : "no layer norm box of its own") +
    " (" + count("ln") + ")");
  if (residual) check(count("add") === kinds.length * cfg.layers + (cfg.ffn ? cfg.layers * stacks : 0),
    "overview: a residual add after each attention and FFN (" + count("add") + ")");
  if (two) check(await tab.evaluate(() => document.querySelectorAll("#overview .ov-cross").length) === cfg.layers,
    "overview: the encoder's output drawn into each decoder block's cross-attention");

  // ---- clicks: the view each opens, checked against the JSON ------------------------
  // a click on the element sel names; false when there is none
  // and the glance drawn again (in a task of its own after the view: overview_js.c)
  const drawn = () => tab.waitForFunction(() => !document.body.dataset.glance_due, { timeout: 60000 });
  const click = async sel => { const el = await tab.$(sel); if (!el) return false; await el.click(); await drawn(); return true; };
  const tap = async sel => { await tab.click(sel); await drawn(); };
  const shown = () => tab.evaluate(() => {
    const s = document.getElementById("selected"), rows = [...document.querySelectorAll("#row tr[data-key]")];
    return { view: document.getElementById("view").dataset.view, sel: Object.assign({}, s ? s.dataset : {}),
      row: rows.map(r => Number(r.dataset.weight)), neuron: !!document.getElementById("neuron") };
  });
  const sameAttention = (s, k, l, h) => {
    const m = input.maps.filter(x => x.kind === k)[l], t = Number(s.sel.token);
    return s.view === "attention" && s.sel.attn === k && Number(s.sel.layer) === l && Number(s.sel.head) === h &&
      JSON.stringify(s.row) === JSON.stringify(m.heads[h].weights[t]);
  };
  let clicked = 0, wrong = [];
  for (const k of kinds) for (let l = 0; l < cfg.layers; l++) for (let h = 0; h < cfg.heads; h++) {
    if (!(await click('#overview .ov-head[data-attn="' + k + '"][data-layer="' + l + '"][data-head="' + h + '"]'))) { wrong.push(k + ":" + l + ":" + h + " has no square"); continue; }
    const s = await shown();
    clicked++;
    if (!sameAttention(s, k, l, h)) wrong.push(k + ":" + l + ":" + h + " -> " + JSON.stringify(s.sel));
  }
  check(!wrong.length, "overview: each of " + clicked + " head squares opens its head (kind, layer, head, its weights): " + wrong.slice(0, 3).join("; "));
  const thumbs = await tab.evaluate(() => document.querySelectorAll("#model-view .mv-thumb").length);
  check(thumbs === kinds.length * cfg.layers * cfg.heads, "model view: " + thumbs + " thumbnails = " + kinds.length + " kinds x " + cfg.layers + " layers x " + cfg.heads + " heads");
  clicked = 0, wrong = [];
  for (const k of kinds) for (let l = 0; l < cfg.layers; l++) for (let h = 0; h < cfg.heads; h++) {
    if (!(await click('#model-view .mv-thumb[data-attn="' + k + '"][data-layer="' + l + '"][data-head="' + h + '"]'))) { wrong.push(k + ":" + l + ":" + h + " has no thumbnail"); continue; }
    const s = await shown();
    clicked++;
    if (!sameAttention(s, k, l, h)) wrong.push(k + ":" + l + ":" + h + " -> " + JSON.stringify(s.sel));
    else if (!(await tab.evaluate((k, l, h) => document.querySelector('.mv-thumb[data-attn="' + k + '"][data-layer="' + l + '"][data-head="' + h + '"]').classList.contains("sel"), k, l, h)))
      wrong.push(k + ":" + l + ":" + h + " not marked as the one shown");
  }
  check(!wrong.length, "model view: each of " + clicked + " thumbnails opens its head and is marked shown: " + wrong.slice(0, 3).join("; "));
  // the view a box opens slides in (its animation), unless the system asks for reduced motion
  const anim = () => tab.evaluate(() => { const v = document.getElementById("view"); return getComputedStyle(v).animationName + " " + getComputedStyle(v).animationDuration; });
  const sq = '#overview .ov-head[data-attn="' + kinds[0] + '"][data-layer="0"][data-head="0"]';
  await click(sq);
  const moving = await anim();
  await tab.emulateMediaFeatures([{ name: "prefers-reduced-motion", value: "reduce" }]);
  await click(sq);
  const still = await anim();
  await tab.emulateMediaFeatures([]);
  check(moving === "ov-in 0.3s" && still === "none 0s", "overview: the view a box opens slides in (" + moving + "), not when motion is to be reduced (" + still + ")");
  // the thumbnail's pixels are its head's weights: the brightest cell of each row where the JSON's largest weight is
  wrong = [];
  const px = await tab.evaluate(() => [...document.querySelectorAll("#model-view .mv-thumb")].map(el => {
    const c = el.querySelector("canvas"), g = c.getContext("2d"), m = data.inputs[state.input].maps.filter(x => x.kind === el.dataset.attn)[Number(el.dataset.layer)];
    const w = m.heads[Number(el.dataset.head)].weights, n = c.width / w[0].length, hi = Math.max(...w.flat());
    const r = w.findIndex(row => row.includes(hi)), j = w[r].indexOf(hi), p = g.getImageData(j * n + n / 2, r * n + n / 2, 1, 1).data;
    return { name: el.dataset.attn + ":" + el.dataset.layer + ":" + el.dataset.head, rgb: [p[0], p[1], p[2]] };
  }));
  px.forEach(p => { if (p.rgb.join() !== "253,231,37") wrong.push(p.name + " " + p.rgb); });
  check(!wrong.length, "model view: each thumbnail's largest weight drawn brightest (viridis' top colour): " + wrong.slice(0, 3).join("; "));

  check(ov.ffn.every(o => !o === !input.ffn), "overview: the feed-forward boxes open a view where the page has one (" + !!input.ffn + ")");
  for (const o of ov.ffn.filter(o => o)) {
    await tap("#overview [data-ov=\"ffn\"][data-open='" + JSON.stringify(o) + "']");
    const s = await shown(), f = input.ffn[o.ffn];
    const ok = s.view === "ffn" && Number(s.sel.ffn) === o.ffn && f && ov.ffn.filter(x => x && x.ffn < o.ffn && (two ? (x.ffn < cfg.layers) === (o.ffn < cfg.layers) : true)).length === f.layer;
    check(ok, "overview: the feed-forward box of " + (f ? f.name : "?") + " opens it (ffn " + s.sel.ffn + ")");
  }
  const embs = await tab.evaluate(() => [...document.querySelectorAll('#overview [data-ov="emb"][data-open]')].map(g => g.dataset.stack));
  check(embs.length === (input.embeddings ? input.embeddings.length : 0), "overview: an embedding box opening each embedding the page holds (" + embs.length + ")");
  for (const st of embs) {
    await tap('#overview [data-ov="emb"][data-stack="' + st + '"]');
    const s = await shown(), i = st === "decoder" ? 1 : 0;
    check(s.view === "embeddings" && Number(s.sel.emb) === i, "overview: the " + st + " embedding opens " + input.embeddings[i].name);
  }
  await tap('#overview [data-ov="probs"]');
  check((await shown()).view === "output", "overview: the probabilities open the output view");
  await tap('#overview [data-ov="qkv"][data-stack="' + (two ? "decoder" : "blocks") + '"]');
  let s = await shown();
  check(s.view === "attention" && s.sel.layer === "0" && s.neuron, "overview: Q, K, V opens layer 0's q.k view (" + s.sel.attn + ")");
  const open = await tab.evaluate(() => [...document.querySelectorAll("#overview .ov-open")].map(g => g.dataset.ov));
  check(open.includes("heads") && open.includes("head"), "overview: the head shown is marked (" + open.join(", ") + ")");

  // ---- head lines of the head shown -------------------------------------------------------
  const k = kinds[kinds.length - 1], l = cfg.layers - 1, h = cfg.heads - 1;
  await click('#model-view .mv-thumb[data-attn="' + k + '"][data-layer="' + l + '"][data-head="' + h + '"]');
  const m = input.maps.filter(x => x.kind === k)[l], w = (m.heads[h] || m.heads[0]).weights;
  const hl = await tab.evaluate(() => {
    const b = document.getElementById("headlines");
    return b && { sel: Object.assign({}, b.dataset), lines: [...b.querySelectorAll(".hl-line")].map(x => [Number(x.dataset.row), Number(x.dataset.col), Number(x.dataset.weight), Number(x.getAttribute("stroke-opacity"))]) };
  });
  const visible = [];
  w.forEach((row, r) => row.forEach((x, c) => { if (!(m.mask && m.mask[r][c] === 0)) visible.push([r, c, x, x]); }));
  check(hl && hl.sel.attn === k && Number(hl.sel.layer) === l && Number(hl.sel.head) === h, "head lines: drawn for the head shown, " + k + " layer " + l + " head " + h);
  check(hl && JSON.stringify(hl.lines) === JSON.stringify(visible), "head lines: " + (hl ? hl.lines.length : 0) + " lines, one per query and key it sees (" +
    visible.length + "), each weight and opacity the JSON's");
  const row = m.rows.length - 1;
  const hover = await tab.evaluate(async r => {
    const tok = document.querySelector('#headlines .hl-tok[data-row="' + r + '"]');
    tok.dispatchEvent(new MouseEvent("mouseenter"));
    const ls = [...document.querySelectorAll("#headlines .hl-line")], on = ls.filter(x => x.classList.contains("hl"));
    const o = x => Number(getComputedStyle(x).strokeOpacity);
    const res = { on: on.map(x => Number(x.dataset.row)), dim: ls.filter(x => !x.classList.contains("hl")).map(o),
      kept: on.map(x => Math.abs(o(x) - Number(x.dataset.weight))) };
    tok.dispatchEvent(new MouseEvent("mouseleave"));
    res.after = document.querySelectorAll("#headlines .hl-line.hl").length;
    return res;
  }, row);
  const seen = visible.filter(v => v[0] === row);
  check(hover.on.length === seen.length && hover.on.every(r => r === row) && hover.dim.every(x => x <= 0.05) &&
    hover.kept.every(d => d < 1e-6) && hover.after === 0,
    "head lines: hovering query " + row + " keeps its " + seen.length + " lines at their weights (the other " + hover.dim.length + " at opacity <= 0.05), leaving restores them");

  // ---- the selected token's path ------------------------------------------------------------
  await tap('#overview .ov-tok[data-stack="0"][data-tok="1"]');
  s = await shown();
  const path = await tab.evaluate(() => ({
    chip: [...document.querySelectorAll(".ov-tok.sel")].map(x => x.dataset.stack + ":" + x.dataset.tok),
    red: [...document.querySelectorAll("#overview .ov-band")].map(b => b.querySelectorAll(".ov-path").length),
  }));
  check(s.sel.token === "1" && JSON.stringify(path.chip) === '["0:1"]' && path.red[0] > 0 && path.red.slice(1).every(n => n === 0) &&
    (!two || s.sel.attn === "encoder"), "token path: token 1 of the first stack chosen by its chip: the view follows it (" + s.sel.attn +
    "), its path red in its stack only (" + path.red.join(", ") + ")");

  // ---- the layer norms and residual adds: each box opens its view, its numbers recomputed ----
  const near = (a, b, tol) => Math.abs(a - b) <= tol * (1 + Math.abs(b));
  const grid = id => tab.evaluate(id => [...document.querySelectorAll("#" + id + " tr")].filter(r => r.querySelector("td[data-value]"))
    .map(r => [...r.querySelectorAll("td[data-value]")].map(td => Number(td.dataset.value))), id);
  const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  const streamBoxes = await tab.evaluate(() => [...document.querySelectorAll('#overview [data-ov="ln"], #overview [data-ov="add"]')].map((g, i) =>
    ({ ov: g.dataset.ov, i: i, open: g.dataset.open ? JSON.parse(g.dataset.open) : null, label: g.textContent })));
  const norms = input.norms || [], residuals = input.residuals || [];
  check(streamBoxes.every(b => b.open), "overview: every layer norm and residual box opens a view (" + streamBoxes.filter(b => b.open).length + " of " + streamBoxes.length + ")");
  check(norms.length === count("ln") + (cfg.pre_norm || cfg.norm === 0 || !residual ? 0 : count("add")) && residuals.length === (residual ? count("add") : 0),
    "the JSON: a layer norm per layer-norm box (and per add & norm, post-norm): " + norms.length + ", a residual per add box: " + residuals.length);
  wrong = [];
  let normsSeen = 0, addsSeen = 0, worst = { y: 0, sum: 0 };
  // a layer norm's numbers against its x: each row's mean and std (stats, as shown), the
  // normalised rows xh (as shown; null: not shown), y = xh * gamma + beta
  const normCheck = (e, stats, xh, y, what) => {
    const C = e.x[0].length;
    e.x.forEach((row, t) => {
      const mu = row.reduce((a, v) => a + v, 0) / C, v = row.reduce((a, u) => a + (u - mu) * (u - mu), 0) / C;
      // mean and std as the JSON writes them: 9 significant digits in float (json_number)
      if (!near(stats[t][0], mu, 1e-8) || !near(stats[t][1], Math.sqrt(v), 1e-8)) wrong.push(what + ": row " + t + " mean/std " + stats[t] + " against " + mu + ", " + Math.sqrt(v));
      const hm = xh ? xh[t].reduce((a, u) => a + u, 0) / C : 0, hv = xh ? xh[t].reduce((a, u) => a + (u - hm) * (u - hm), 0) / C : 0;
      if (xh && (Math.abs(hm) > 1e-6 || !near(hv, v / (v + e.eps), 1e-6))) wrong.push(what + ": normalised row " + t + " has mean " + hm + ", var " + hv + " (want 0, " + v / (v + e.eps) + ")");
      row.forEach((u, c) => {
        const want = (u - mu) / Math.sqrt(v + e.eps) * e.gamma[c] + e.beta[c];
        worst.y = Math.max(worst.y, Math.abs(y[t][c] - want) / (1 + Math.abs(want)));
      });
    });
  };
  for (const b of streamBoxes.filter(b => b.open)) {
    await tap("#overview [data-ov=\"" + b.ov + "\"][data-open='" + JSON.stringify(b.open) + "']");
    const sel = (await shown()).sel, title = await tab.evaluate(() => document.querySelector("#selected h2").textContent + " | " + document.querySelector("#selected .formula").textContent);
    if (b.ov === "ln") {
      const e = norms[b.open.norm];
      const stats = await tab.evaluate(() => [...document.querySelectorAll("#norm-stats tr[data-row]")].map(r => [Number(r.dataset.mean), Number(r.dataset.std)]));
      const x = await grid("norm-x"), xh = await grid("norm-xhat"), y = await grid("norm-y");
      const what = (e.at === "final" ? "final" : e.block + " " + e.layer + " " + e.at + " " + e.sublayer);
      if ((await shown()).view !== "norms" || Number(sel.norm) !== b.open.norm) { wrong.push(what + ": opens " + JSON.stringify(sel)); continue; }
      if (!same(x, e.x) || !same(y, e.y)) wrong.push(what + ": the grids are not the JSON's x and y");
      const words = e.at === "final" ? ["final layer norm"] : [e.block + " " + e.layer, e.at === "before" ? "before the" : "after the residual add", e.sublayer === "ffn" ? "feed-forward" : "attention"];
      if (!words.every(w => title.includes(w)) || !title.includes("gamma + beta") || !title.includes("eps = " + e.eps)) wrong.push(what + ": caption " + title);
      normCheck(e, stats, xh, y, what);
      normsSeen++;
    } else {
      const e = residuals[b.open.res], what = e.block + " " + e.layer + " " + e.sublayer;
      if ((await shown()).view !== "residuals" || Number(sel.res) !== b.open.res) { wrong.push(what + ": opens " + JSON.stringify(sel)); continue; }
      const x = await grid("res-x"), f = await grid("res-f"), sum = await grid("res-sum"), n = await grid("res-norm");
      if (!same(x, e.x) || !same(f, e.f) || !same(sum, e.sum)) wrong.push(what + ": the grids are not the JSON's x, f, sum");
      x.forEach((row, t) => row.forEach((u, c) => { worst.sum = Math.max(worst.sum, Math.abs(u + f[t][c] - sum[t][c]) / (1 + Math.abs(sum[t][c]))); }));
      const post = norms.find(m => m.at === "after" && m.stack === e.stack && m.layer === e.layer && m.sublayer === e.sublayer);
      if (!cfg.pre_norm && cfg.norm !== 0 && !(post && same(post.x, e.sum) && same(n, post.y))) wrong.push(what + ": post-norm, the layer norm after the add (of the sum) is not shown");
      if (post) normCheck(post, post.mean.map((m, t) => [m, post.std[t]]), null, n, what + " (its layer norm)"), normsSeen++;
      if ((cfg.pre_norm || cfg.norm === 0) && n.length) wrong.push(what + ": a layer norm after the add drawn, and the model has none there");
      const pre = norms.find(m => m.at === "before" && m.stack === e.stack && m.layer === e.layer && m.sublayer === e.sublayer);
      if (cfg.pre_norm && !(pre && same(pre.x, e.x))) wrong.push(what + ": the layer norm before the sublayer does not read the residual stream x");
      if (!title.includes(e.block + " " + e.layer) || !title.includes("x + f(x)")) wrong.push(what + ": caption " + title);
      addsSeen++;
    }
  }
  check(!wrong.length, "layer norm and residual boxes: each of " + normsSeen + " layer norms and " + addsSeen + " residual adds opens its view with the JSON's numbers and a caption naming it: " + wrong.slice(0, 3).join("; "));
  if (normsSeen) check(worst.y <= 1e-5, "layer norm: every shown y = (x - mean) / sqrt(var + eps) * gamma + beta recomputed from x (largest error " + worst.y.toExponential(2) + ", <= 1e-5), each row's mean and std the JSON's, the normalised rows shown of mean 0 and var var/(var + eps)");
  if (addsSeen) check(worst.sum <= 1e-6, "residual add: every shown sum = x + f (largest error " + worst.sum.toExponential(2) + ", <= 1e-6)");

  // ---- heads switched off --------------------------------------------------------------------
  const marked = await tab.evaluate(() => ({
    thumbs: [...document.querySelectorAll(".mv-thumb.mv-off")].map(e => e.dataset.attn + ":" + e.dataset.layer + ":" + e.dataset.head + ":" + !!e.querySelector(".mv-mark")),
    squares: [...document.querySelectorAll(".ov-head.ov-off")].map(e => e.dataset.attn + ":" + e.dataset.layer + ":" + e.dataset.head),
  }));
  const offs = data.heads_off || [];
  check(JSON.stringify(marked.thumbs) === JSON.stringify(offs.map(x => x + ":true")) && JSON.stringify(marked.squares) === JSON.stringify(offs) &&
    (!off || JSON.stringify(offs) === JSON.stringify([off])), "heads off: " + (offs.join(", ") || "none") + " marked on thumbnail and square, no other");
  await browser.close();
  process.stdout.write(JSON.stringify({ checks: checks, console: consoleLog }) + "\n");
})().catch(e => { process.stderr.write(String(e && e.stack || e) + "\n"); process.exit(1); });
