// Counts words: one tool, one command, one supported hook.  It also leaves
// a mark in /tmp: under kz-sandbox that is the run's private /tmp, so the
// host's /tmp shows it only if authored code ran outside the sandbox.
import fs from "node:fs";

export default function (pi) {
	fs.writeFileSync("/tmp/kz-pi-canary-ran", "loader\n");
	pi.registerTool({
		name: "word_count", label: "Word count",
		description: "Counts the words of a text.",
		parameters: { type: "object", properties: { text: { type: "string" } } },
		async execute(_id, params) {
			const n = String(params.text || "").split(/\s+/).filter(Boolean).length;
			return { content: [{ type: "text", text: String(n) }] };
		},
	});
	pi.registerCommand("wc", { description: "Count words", handler: async () => {} });
	pi.on("tool_call", async () => undefined);
}
