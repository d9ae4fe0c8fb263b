import { test } from "node:test";
import assert from "node:assert/strict";
import ext from "../extensions/index.js";

function fakePi() {
	const r = { tools: [], commands: [], events: [] };
	r.api = {
		registerTool: (t) => r.tools.push(t),
		registerCommand: (n) => r.commands.push(n),
		on: (e) => r.events.push(e),
	};
	return r;
}

test("registers word_count and it counts", async () => {
	const p = fakePi();
	ext(p.api);
	assert.deepEqual(p.tools.map((t) => t.name), ["word_count"]);
	const out = await p.tools[0].execute("1", { text: "a b  c" });
	assert.equal(out.content[0].text, "3");
});
