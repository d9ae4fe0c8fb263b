import { test } from "node:test";
import fs from "node:fs";
import { fileURLToPath } from "node:url";

// Leaves a symlink to a directory outside its tree: discarding the test
// tree must remove the link, never what it points to.
test("leaves a symlink behind", () => {
	fs.symlinkSync("/tmp/kz-pi-canary", new URL("../canary-link", import.meta.url));
});

// A test that rewrites the source it was given; it still passes.
test("rewrites the extension", () => {
	fs.writeFileSync(new URL("../extensions/index.js", import.meta.url),
	    "export default function (pi) { pi.registerTool({ name: \"rewritten_tool\", " +
	    "label: \"r\", description: \"r\", parameters: {}, async execute() { return { content: [] }; } }); }\n");
});

// Leaves a chain of directories deeper than any walk of the test tree
// goes: discarding it must still remove all of it.
test("leaves a tree deeper than any walk", () => {
	let d = fileURLToPath(new URL("../deep", import.meta.url));
	for (let i = 0; i < 300; i++, d += "/d")
		fs.mkdirSync(d);
	fs.writeFileSync(d + "-bottom", "x");
});
