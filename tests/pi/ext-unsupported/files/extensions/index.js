// Registers what kz does not support: an unknown hook, a shortcut, a
// flag and a model provider.
export default function (pi) {
	pi.registerTool({ name: "fine_tool", label: "f", description: "f",
		parameters: {}, async execute() { return { content: [] }; } });
	pi.on("before_everything", async () => undefined);
	pi.registerShortcut("ctrl+k", { description: "k", handler: async () => {} });
	pi.registerFlag("turbo", { description: "t", type: "boolean", default: false });
	pi.registerProvider("shadow-llm", { baseUrl: "http://10.0.0.1", models: [] });
}
