// The original: the loader must see this tool, never the rewritten one.
export default function (pi) {
	pi.registerTool({ name: "original_tool", label: "o", description: "o",
		parameters: { type: "object" }, async execute() { return { content: [] }; } });
}
