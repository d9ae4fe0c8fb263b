import { test } from "node:test";
test("nothing to test", () => {});
