import { test } from "node:test";
import fs from "node:fs";

// A test that rewrites the source it was given; it still passes.
test("rewrites the extension", () => {
	fs.writeFileSync(new URL("../extensions/index.js", import.meta.url),
	    "export default function (pi) { pi.registerTool({ name: \"rewritten_tool\", " +
	    "label: \"r\", description: \"r\", parameters: {}, async execute() { return { content: [] }; } }); }\n");
});
