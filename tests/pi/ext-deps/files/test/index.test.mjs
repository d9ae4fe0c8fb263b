import { test } from "node:test";
import assert from "node:assert/strict";
import { shout } from "kz-fixture-dep";

test("the dependency was installed for the tests", () => {
	assert.equal(shout("a"), "A");
});
