// kz-pi-validate's disposable child: runs the real Pi loaders on a fresh
// copy of the package and returns what they observed over the result
// channel (kz-pi-validate(8), "CHILD PROTOCOL").
//
// argv[2] is the spec the parent wrote: {mode, pi, root, agent_dir,
// skills[], extensions[]}; paths in skills and extensions were already
// resolved beneath root by the parent's rooted-path module.
//
// Order matters: drain and close the nonce descriptor, move the result
// channel off its advertised number, import Pi, and only then load
// authored code.  Nothing written to stdout or stderr is a result.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

// What the report is written with, taken before anything else loads: the
// JavaScript intrinsics (JSON, Array, Map...) are frozen by the parent
// (node --frozen-intrinsics), but Node's own module objects are not, and
// authored code could replace fs.writeSync or process.exit to rewrite the
// report, nonce and all, on its way out.
const { writeSync, closeSync } = fs;
const exit = process.exit.bind(process);
const reallyExit = process.reallyExit.bind(process);

const nonceFd = Number(process.env.KZ_PI_NONCE_FD);
const resultFd = Number(process.env.KZ_PI_RESULT_FD);
if (!(nonceFd === 3 && resultFd === 4)) {
	// 125: the channel was not set up; the parent treats it as isolation
	// failure, never as a result.
	console.error("kz-pi child: channel descriptors not advertised");
	process.exit(125);
}
const nonce = fs.readFileSync(nonceFd, "utf8"); // to end of file
fs.closeSync(nonceFd);
// A fresh open of the same pipe under a new number; then the advertised
// number is closed, so authored code writing to fd 4 reaches nothing.
const out = fs.openSync(`/proc/self/fd/${resultFd}`, "w");
fs.closeSync(resultFd);
delete process.env.KZ_PI_NONCE_FD;
delete process.env.KZ_PI_RESULT_FD;

function send(observation) {
	const text = JSON.stringify({ nonce, observation });
	writeSync(out, text);
	closeSync(out);
	// Authored code may keep the event loop alive, or hook the exit
	// path: the child is done either way.
	try {
		exit(0);
	} finally {
		reallyExit(0);
	}
}

const names = (m) => (m instanceof Map ? [...m.keys()].map(String) : []);
const errText = (e) => String(e && e.message ? e.message : e).slice(0, 200);

const spec = JSON.parse(process.argv[2]);
let pi;
try {
	pi = await import(pathToFileURL(spec.pi).href);
} catch (e) {
	console.error("kz-pi child: cannot import Pi:", errText(e));
	send({ loader_unavailable: true });
}
if (typeof pi.loadSkillsFromDir !== "function" ||
    typeof pi.discoverAndLoadExtensions !== "function")
	send({ loader_unavailable: true });

const obs = { skills: [], skill_diagnostics: [], extensions: [],
	providers: [], errors: [] };
const rel = (p) => path.relative(spec.root, p);

for (const dir of spec.skills) {
	try {
		const r = pi.loadSkillsFromDir({ dir: path.join(spec.root, dir),
			source: "kz-proposal" });
		for (const s of r.skills)
			obs.skills.push({ name: s.name, file: rel(s.filePath) });
		for (const d of r.diagnostics)
			obs.skill_diagnostics.push(
			    `${d.type || "diagnostic"}: ${errText(d.message)}`);
	} catch (e) {
		obs.errors.push("skill loader: " + errText(e));
	}
}

if (spec.mode === "extension") {
	fs.mkdirSync(spec.agent_dir, { recursive: true });
	const empty = path.join(spec.agent_dir, "cwd");
	fs.mkdirSync(empty, { recursive: true });
	const paths = spec.extensions.map((e) => path.join(spec.root, e));
	try {
		// cwd and agentDir are empty: only the declared entry points load.
		const r = await pi.discoverAndLoadExtensions(paths, empty,
		    spec.agent_dir);
		for (const x of r.extensions)
			obs.extensions.push({ path: rel(x.resolvedPath || x.path),
				tools: names(x.tools), commands: names(x.commands),
				handlers: names(x.handlers), flags: names(x.flags),
				shortcuts: names(x.shortcuts),
				renderers: names(x.messageRenderers) });
		for (const e of r.errors)
			obs.errors.push(`${rel(e.path)}: ${errText(e.error)}`);
		for (const p of r.runtime.pendingProviderRegistrations || [])
			obs.providers.push(String(p.name));
	} catch (e) {
		obs.errors.push("extension loader: " + errText(e));
	}
}
send(obs);
