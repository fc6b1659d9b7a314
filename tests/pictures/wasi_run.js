// tests/pictures/wasi_run.js MODULE.wasm DIR ARG...: a WASI command (make
// wasm) run by node, as a shell would run the native program, with DIR its
// one directory, seen as "/".  make_pictures.sh trains the live pictures'
// translator this way: the same WebAssembly as the page's, hence the same
// bits on every machine (the native build's kernels round as the CPU's
// ISA lets them).  Exits with the program's status.
"use strict";
const fs = require("fs");
const { WASI } = require("node:wasi");
const [mod, dir, ...args] = process.argv.slice(2);
const wasi = new WASI({ version: "preview1", args: ["program"].concat(args), env: {}, preopens: { "/": dir },
                        returnOnExit: true });
WebAssembly.instantiate(fs.readFileSync(mod), { wasi_snapshot_preview1: wasi.wasiImport })
  .then(({ instance }) => process.exit(wasi.start(instance)))
  .catch(e => { console.error(String(e)); process.exit(1); });
