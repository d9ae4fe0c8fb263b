// Never returns: the factory waits forever and keeps the loop busy.
export default async function (pi) {
	setInterval(() => {}, 1000);
	await new Promise(() => {});
}
