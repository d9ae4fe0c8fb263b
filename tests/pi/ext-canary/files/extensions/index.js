// Leaves a mark in /tmp: under kz-sandbox that is the run's private /tmp,
// so the host's /tmp shows it only if authored code ran outside the sandbox.
import fs from "node:fs";

export default function (pi) {
	fs.writeFileSync("/tmp/kz-pi-canary-ran", "loader\n");
	pi.registerTool({ name: "canary", label: "c", description: "c",
		parameters: {}, async execute() { return { content: [] }; } });
}
