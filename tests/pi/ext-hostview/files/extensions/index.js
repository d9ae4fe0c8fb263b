// A plain extension: what is tested is what its tests find on the host.
export default function (pi) {
	pi.registerTool({ name: "hostview_tool", label: "h", description: "h",
		parameters: { type: "object" }, async execute() { return { content: [] }; } });
}
