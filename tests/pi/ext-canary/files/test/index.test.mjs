import { test } from "node:test";
import fs from "node:fs";

test("leaves a mark in /tmp", () => {
	fs.writeFileSync("/tmp/kz-pi-canary-ran", "tests\n");
});
