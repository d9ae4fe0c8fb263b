import { test } from "node:test";
import assert from "node:assert/strict";

test("this extension is not ready", () => {
	assert.equal(1 + 1, 3);
});
