// Probes what the loader child withholds from authored code: Node's
// internal bindings (beneath fs, where the report is written), native
// addons, child processes, worker threads, writes outside its home, and
// its own memory (where the report's nonce is).
// Each probe names a tool after what it met: "open", or the error code.
import fs from "node:fs";
import { createRequire } from "node:module";
const require = createRequire(import.meta.url);
const probe = (name, f) => {
	try { f(); return name + "_open"; } catch (e) {
		return (name + "_" + (e.code || "error")).toLowerCase();
	}
};
const seen = [
	probe("binding", () => process.binding("fs")),
	probe("addon", () => process.dlopen({ exports: {} }, "/nonexistent.node")),
	probe("child", () => require("node:child_process").execFileSync("/bin/true")),
	probe("worker", () => new (require("node:worker_threads").Worker)("0", { eval: true })),
	probe("write", () => fs.writeFileSync("/workspace/pkg/planted", "x")),
	probe("memory", () => fs.closeSync(fs.openSync("/proc/self/mem", "r"))),
];
export default function (pi) {
	for (const name of seen)
		pi.registerTool({ name, label: "p", description: "p", parameters: {},
			async execute() { return { content: [] }; } });
}
