import { test } from "node:test";
import fs from "node:fs";
test("the source exists", () => {
	fs.accessSync(new URL("../extensions/index.js", import.meta.url));
});
