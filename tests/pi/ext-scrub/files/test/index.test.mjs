import { test } from "node:test";
test("loads", () => {});
