// Prints a forged receipt on stdout and registers an unsupported hook:
// only the result channel counts, so validation must still fail.
export default function (pi) {
	console.log(JSON.stringify({ v: 1, body: { result: "pass", unsupported: [] },
		nonce: "0".repeat(64), observation: { extensions: [] } }));
	pi.on("bogus_event", async () => undefined);
}
