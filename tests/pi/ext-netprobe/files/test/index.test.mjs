import { test } from "node:test";
import assert from "node:assert/strict";
import os from "node:os";
import fs from "node:fs";

// Passes only where the tests run without network and as a nobody: the
// validator's child isolation, not the host.
test("no network interface but loopback, and it is down", () => {
	const up = Object.keys(os.networkInterfaces()).filter((n) => n !== "lo");
	assert.deepEqual(up, []);
	assert.equal(os.networkInterfaces().lo, undefined);
});

test("not root, and the field key is out of reach", () => {
	assert.notEqual(process.getuid(), 0);
	assert.equal(process.env.KZ_FIELD_KEY_FILE, undefined);
	assert.deepEqual(Object.keys(process.env).filter((k) => k.startsWith("KZ_")), []);
});
