// Exits 3 while it loads, as kz-sandbox does when it cannot isolate: the
// validation must fail (exit 1), not report an unavailable sandbox.
export default function () {
	process.exit(3);
}
