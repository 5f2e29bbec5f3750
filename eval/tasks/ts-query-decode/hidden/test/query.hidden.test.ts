import test from "node:test";
import assert from "node:assert/strict";
import { buildQuery, parseQuery } from "../src/query";

test("hidden: values and keys are decoded", () => {
  assert.deepEqual(parseQuery("?q=hello%20world&name=J%C3%B6rg"), { q: "hello world", name: "Jörg" });
  assert.deepEqual(parseQuery("q=fish+and+chips"), { q: "fish and chips" });
  assert.deepEqual(parseQuery("sort%20by=date"), { "sort by": "date" });
  assert.deepEqual(parseQuery("plus=%2B"), { plus: "+" });
});

test("hidden: odd shapes", () => {
  assert.deepEqual(parseQuery("expr=a=b"), { expr: "a=b" });
  assert.deepEqual(parseQuery("flag&x=1"), { flag: "", x: "1" });
  assert.deepEqual(parseQuery("a=1&&b=2&"), { a: "1", b: "2" });
  assert.deepEqual(parseQuery(""), {});
  assert.deepEqual(parseQuery("?"), {});
});

test("hidden: round trip", () => {
  const params = { city: "São Paulo", "a&b": "c=d", empty: "" };
  assert.deepEqual(parseQuery(buildQuery(params)), params);
});
