// scroll_probe.js: put into a copy of an attention page by test_explorer.sh.
// In a frame 300 px high (a short window), scrolls the head's grid to its
// last row and column, as a reader would with a long sentence, and records
// where things are (body's data-probe):
// the grid's frame, its first column label, its first row label, the
// numbers beside it, the window.  check_page.py scroll reads them.
(() => {
  const w = document.querySelector("#view .heatwrap"), t = w.querySelector("table");
  w.style.maxHeight = "300px";
  w.scrollTop = w.scrollHeight;
  w.scrollLeft = w.scrollWidth;
  const r = e => { const b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
  document.body.dataset.probe = JSON.stringify({
    scrolled: [w.scrollLeft, w.scrollTop], frame: r(w), col: r(t.querySelector("th.col")),
    label: r(t.querySelector("th.rowlab")), numbers: r(document.getElementById("row")),
    page: document.documentElement.scrollWidth, window: [innerWidth, innerHeight]
  });
})();
