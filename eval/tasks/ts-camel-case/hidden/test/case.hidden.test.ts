import test from "node:test";
import assert from "node:assert/strict";
import { toCamelCase } from "../src/case";

test("hidden: separators anywhere are ignored", () => {
  assert.equal(toCamelCase("foo__bar"), "fooBar");
  assert.equal(toCamelCase("_private"), "private");
  assert.equal(toCamelCase("trailing-"), "trailing");
  assert.equal(toCamelCase("  spaced   out "), "spacedOut");
  assert.equal(toCamelCase("a-_-b"), "aB");
});

test("hidden: edge cases", () => {
  assert.equal(toCamelCase(""), "");
  assert.equal(toCamelCase("___"), "");
  assert.equal(toCamelCase("HTTP_server"), "httpServer");
  assert.equal(toCamelCase("x"), "x");
  assert.equal(toCamelCase("tab\tseparated"), "tabSeparated");
});
