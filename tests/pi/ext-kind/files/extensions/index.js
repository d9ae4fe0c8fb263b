// An extension kz would refuse (an unsupported flag), beside a skill that
// validates on its own: a receipt for the skill profile must not count
// for the extension profile.
export default function (pi) {
	pi.registerFlag("turbo", { description: "t", type: "boolean", default: false });
}
