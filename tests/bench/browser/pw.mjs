// playwright-core driving the same Debian Chromium over its pipe, as the
// seed's runtime does: launch, new page, goto until load, close; N times.
// Prints one line of milliseconds per iteration.
// usage: node pw.mjs URL HOST ADDR N
import { chromium } from "playwright-core";

const [url, host, addr, n] = process.argv.slice(2);
for (let i = 0; i < Number(n); i++) {
  const t0 = performance.now();
  const b = await chromium.launch({
    executablePath: "/usr/lib/chromium/chromium",
    headless: true,
    args: ["--no-sandbox", `--host-resolver-rules=MAP ${host} ${addr}`],
  });
  const p = await b.newPage();
  await p.goto(url, { waitUntil: "load" });
  console.log((performance.now() - t0).toFixed(1));
  await b.close();
}
