// tests/live/drive.js: a live page clicked as a learner clicks it, in
// Debian's chromium driven by puppeteer-core (tests/live/test_live.sh
// installs it with npm when missing).  Prints one JSON object on stdout.
//
//   node drive.js train PAGE STEPS [STOP_AT [DOM]]
//       the ladder's page: STEPS typed in its box, "run" clicked; with
//       STOP_AT (0: none), "stop" clicked once the progress passes step
//       STOP_AT.  Reports the progress lines seen, the main thread's long
//       tasks (the performance timeline's, over 50 ms) from the click to
//       the pictures ("trained": the time the worker's run ended), the
//       status and the page's JSON; the page's DOM then goes to DOM.
//   node drive.js dom PAGE QUERY DOM
//       PAGE?QUERY once its runs are done (data-live set): its DOM to DOM
//       (a page whose program runs in a worker: headless chromium's
//       --dump-dom with virtual time would not wait for it).
//   node drive.js eval PAGE QUERY EXPRESSION
//       PAGE?QUERY once its runs are done: EXPRESSION evaluated in it
//       (what a style or a layout gives, which a DOM dump cannot say).
//   node drive.js click PAGE QUERY SELECTOR [SELECTOR ...]
//       PAGE?QUERY once its runs are done: each SELECTOR clicked in turn
//       (a row of the heatmap, a head's thumbnail); reports after each
//       the page's choice (#selected's data-* attributes).
//   node drive.js type PAGE ID TEXT CLICK_ID [ID TEXT CLICK_ID ...]
//       for each triple, TEXT typed into the box ID (replacing it) and
//       CLICK_ID clicked; reports, after each, the messages beside the
//       controls, the status, the error line, whether the pictures are
//       marked stale, and the page's JSON.
"use strict";
const puppeteer = require("puppeteer-core");

async function open(page, query) {
  const browser = await puppeteer.launch({
    executablePath: "/usr/bin/chromium", headless: true,
    protocolTimeout: 1800000, // a page that runs its program on its own thread answers only when the run ends
    args: ["--no-sandbox", "--disable-gpu", "--proxy-server=127.0.0.1:9", "--window-size=1200,1400"],
  });
  const tab = await browser.newPage();
  const console_ = [];
  tab.on("console", m => console_.push(m.type() + ": " + m.text()));
  tab.on("pageerror", e => console_.push("pageerror: " + e.message));
  await tab.evaluateOnNewDocument(() => {
    window.__long = [];
    new PerformanceObserver(l => l.getEntries().forEach(e => window.__long.push({ at: e.startTime, ms: e.duration })))
      .observe({ type: "longtask", buffered: true });
  });
  await tab.goto("file://" + page + (query ? "?" + query : ""));
  await tab.waitForFunction(() => document.body.dataset.live, { timeout: 600000 });
  return { browser, tab, console_ };
}

async function setBox(tab, id, text) {
  await tab.$eval("#" + id, (b, t) => { b.value = t; }, text);
}

async function train(page, steps, stopAt, dom) {
  const { browser, tab, console_ } = await open(page);
  await setBox(tab, "live-train", String(steps));
  const t0 = await tab.evaluate(() => performance.now());
  // "run" clicked from a task of the page's own: the answer comes once that
  // task ends, at once when the run goes to a worker, at the run's end when
  // the page runs it on its own thread (a mouse click then never got its)
  await tab.evaluate(() => new Promise(done => setTimeout(() => { done(); document.getElementById("live-run").click(); }, 0)));
  const seen = [];
  let stopped = false;
  for (;;) {
    // (a page without progress, stop or error line, which ran on its own
    // thread, reads as none: its run ends with its status)
    const s = await tab.evaluate(() => {
      const text = id => (document.getElementById(id) || { textContent: "" }).textContent;
      return { progress: text("live-progress"), running: !!document.getElementById("live-stop") && !document.getElementById("live-stop").disabled,
        status: text("live-status"), error: text("live-error") };
    });
    if (s.progress && seen[seen.length - 1] !== s.progress) seen.push(s.progress);
    const m = /step (\d+) of/.exec(s.progress);
    if (stopAt && !stopped && m && Number(m[1]) >= stopAt) { await tab.click("#live-stop"); stopped = true; }
    if (!s.running && !/^running/.test(s.status) && (seen.length || s.error || s.status)) break;
    await new Promise(r => setTimeout(r, 1000));
  }
  const r = await tab.evaluate(t0 => {
    const text = id => (document.getElementById(id) || { textContent: "" }).textContent;
    return { long: window.__long.filter(e => e.at >= t0), ms: performance.now() - t0, status: text("live-status"),
      progress: text("live-progress"), error: text("live-error"), json: text("live-json"),
      // the run's end as the page says it, else now (the run was seen to end)
      trained: Number(document.body.dataset.live_trained || performance.now()) };
  }, t0);
  if (dom) require("fs").writeFileSync(dom, await tab.content());
  r.seen = seen;
  r.console = console_;
  await browser.close();
  return r;
}

async function type(page, triples) {
  const { browser, tab, console_ } = await open(page);
  const after = [];
  for (let i = 0; i + 2 < triples.length; i += 3) {
    await setBox(tab, triples[i], triples[i + 1]);
    await tab.click("#" + triples[i + 2]);
    await new Promise(r => setTimeout(r, 300));
    await tab.waitForFunction(() => !/^running/.test(document.getElementById("live-status").textContent) &&
      !(document.getElementById("live-stop") && !document.getElementById("live-stop").disabled), { timeout: 300000 });
    after.push(await state(tab));
  }
  await browser.close();
  return { after, console: console_ };
}
function state(tab) {
  return tab.evaluate(() => ({
    messages: [...document.querySelectorAll(".invalid")].map(e => ({ id: e.id, text: e.textContent })),
    status: document.getElementById("live-status").textContent,
    error: document.getElementById("live-error").textContent,
    stale: document.body.classList.contains("live-stale") && !document.getElementById("live-stale").hidden,
    json: document.getElementById("live-json").textContent,
  }));
}

async function click(page, query, selectors) {
  const { browser, tab, console_ } = await open(page, query);
  const after = [];
  for (const sel of selectors) {
    await tab.click(sel);
    after.push(await tab.evaluate(() => Object.assign({}, document.getElementById("selected").dataset)));
  }
  await browser.close();
  return { after, console: console_ };
}

async function dom(page, query, out) {
  const { browser, tab, console_ } = await open(page, query);
  require("fs").writeFileSync(out, await tab.content());
  await browser.close();
  return { console: console_ };
}

async function evaluate(page, query, expr) {
  const { browser, tab, console_ } = await open(page, query);
  const value = await tab.evaluate(expr);
  await browser.close();
  return { value, console: console_ };
}

(async () => {
  const [what, page, ...rest] = process.argv.slice(2);
  const r = what === "train" ? await train(page, Number(rest[0]), Number(rest[1] || 0), rest[2])
    : what === "type" ? await type(page, rest) : what === "dom" ? await dom(page, rest[0], rest[1])
    : what === "eval" ? await evaluate(page, rest[0], rest[1])
    : what === "click" ? await click(page, rest[0], rest.slice(1)) : null;
  if (!r) throw new Error("drive.js train PAGE STEPS [STOP_AT] | type PAGE ID TEXT CLICK_ID | click PAGE QUERY SELECTOR...");
  process.stdout.write(JSON.stringify(r) + "\n");
})().catch(e => { process.stderr.write(String(e && e.stack || e) + "\n"); process.exit(1); });
