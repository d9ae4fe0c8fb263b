import { test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import os from "node:os";

// Passes only where the tests run without network and as a nobody: the
// validator's child isolation, not the host.
test("no network interface but loopback", () => {
	let ifs = {};
	try {
		ifs = os.networkInterfaces();
	} catch (e) {
		// kz-sandbox refuses netlink sockets: nothing to list.
		assert.equal(e.code, "ERR_SYSTEM_ERROR");
	}
	assert.deepEqual(Object.keys(ifs).filter((n) => n !== "lo"), []);
	for (const a of ifs.lo || [])
		assert.equal(a.internal, true);
});

test("no route out: a private address is unreachable", async () => {
	const err = await new Promise((resolve) => {
		const s = net.connect({ host: "10.255.255.1", port: 9, timeout: 2000 });
		s.on("connect", () => { s.destroy(); resolve(null); });
		s.on("timeout", () => { s.destroy(); resolve({ code: "TIMEOUT" }); });
		s.on("error", resolve);
	});
	assert.equal(err?.code, "ENETUNREACH");
});

test("not root, and no KZ_ variable in the environment", () => {
	assert.notEqual(process.getuid(), 0);
	assert.notEqual(process.getgid(), 0);
	assert.deepEqual(Object.keys(process.env).filter((k) => k.startsWith("KZ_")), []);
});
