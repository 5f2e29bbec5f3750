import test from "node:test";
import assert from "node:assert/strict";
import { last, unique } from "../src/array";

test("unique keeps first occurrences", () => {
  assert.deepEqual(unique([3, 1, 3, 2, 1]), [3, 1, 2]);
});

test("last", () => {
  assert.equal(last([1, 2, 3]), 3);
  assert.equal(last([]), undefined);
});
