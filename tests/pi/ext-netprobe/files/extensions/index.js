// Counts words: one tool, one command, one supported hook.
export default function (pi) {
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
