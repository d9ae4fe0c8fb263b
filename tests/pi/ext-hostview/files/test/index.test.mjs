import { test } from "node:test";
import assert from "node:assert";
import fs from "node:fs";

// The e2e test writes probe.json beside the tree before it validates:
// { tmp, shm: files to leave; open: a world-writable host directory;
//   hostpid: a pid of the host }.  In kz-pi-validate's unshare mode every
// one of these passes; run on the host as it is, most fail.
const probe = JSON.parse(fs.readFileSync(new URL("../probe.json", import.meta.url)));

test("leaves files in /tmp and /dev/shm", () => {
	fs.writeFileSync(probe.tmp, "left by a validation");
	fs.writeFileSync(probe.shm, "left by a validation");
});

test("cannot write a world-writable host directory", () => {
	assert.throws(() => fs.writeFileSync(probe.open + "/left", "x"),
	    { code: "EROFS" });
});

test("sees only its own processes", () => {
	const pids = fs.readdirSync("/proc").filter((n) => /^\d+$/.test(n));
	assert.ok(pids.length < 16, `${pids.length} processes in /proc`);
	assert.ok(!fs.existsSync(`/proc/${probe.hostpid}`), "a host pid is visible");
});
