// Builds the viewer into one self-contained HTML file, rath_mcp/apps/viewer.html: the bundled
// script (src/main.js with @dagrejs/dagre) and the stylesheet inlined into src/index.html. The
// output depends only on the sources and the locked packages (no timestamps, no paths), so CI can
// rebuild it and compare.
//
//   node web/build.mjs            write rath_mcp/apps/viewer.html
//   node web/build.mjs --check    exit 1 if the shipped file differs from what the sources build
//   node web/build.mjs --host OUT bundle the test host page's script (tests/apps/host/host.js) to OUT

import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const shipped = join(here, "..", "rath_mcp", "apps", "viewer.html");

async function bundle(entry, options = {}) {
  const out = await esbuild.build({
    entryPoints: [entry],
    bundle: true,
    minify: true,
    format: "iife",
    target: ["es2022", "chrome120", "firefox120", "safari17"],
    legalComments: "eof",
    charset: "utf8",
    write: false,
    logLevel: "warning",
    nodePaths: [join(here, "node_modules")],
    ...options,
  });
  return out.outputFiles[0].text;
}

async function viewer() {
  const script = await bundle(join(here, "src", "main.js"));
  const style = (await esbuild.transform(readFileSync(join(here, "src", "style.css"), "utf8"), { loader: "css", minify: true })).code;
  // Inside <script>, the text "</script" would end the element early; "<\/script" means the same to JS.
  const safeScript = script.replace(/<\/script/gi, "<\\/script");
  const template = readFileSync(join(here, "src", "index.html"), "utf8");
  return template.replace("/*STYLE*/", () => style.trim()).replace("/*SCRIPT*/", () => safeScript.trim());
}

const args = process.argv.slice(2);
if (args[0] === "--host") {
  writeFileSync(args[1], await bundle(join(here, "..", "tests", "apps", "host", "host.js"), { minify: false }));
} else if (args[0] === "--check") {
  const built = await viewer();
  const current = readFileSync(shipped, "utf8");
  if (built !== current) {
    console.error("rath_mcp/apps/viewer.html differs from what web/ builds: run `bash web/build.sh` and commit the result");
    process.exit(1);
  }
  console.log(`rath_mcp/apps/viewer.html matches its sources (${built.length} bytes)`);
} else {
  const built = await viewer();
  writeFileSync(shipped, built);
  console.log(`wrote rath_mcp/apps/viewer.html (${built.length} bytes)`);
}
