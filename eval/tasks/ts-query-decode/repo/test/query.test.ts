import test from "node:test";
import assert from "node:assert/strict";
import { buildQuery, parseQuery } from "../src/query";

test("parseQuery reads pairs", () => {
  assert.deepEqual(parseQuery("?a=1&b=two"), { a: "1", b: "two" });
});

test("buildQuery encodes", () => {
  assert.equal(buildQuery({ a: "1", b: "x y" }), "a=1&b=x%20y");
});
