// Imports its declared dependency: the loader sees it only when the
// validator reinstalled it from the lock.
import { shout } from "kz-fixture-dep";

export default function (pi) {
	pi.registerTool({ name: shout("dep") + "_tool", label: "d",
		description: "d", parameters: {},
		async execute() { return { content: [] }; } });
}
