import test from "node:test";
import assert from "node:assert/strict";
import { chunk } from "../src/array";

test("hidden: chunk splits in order", () => {
  assert.deepEqual(chunk([1, 2, 3, 4, 5], 2), [[1, 2], [3, 4], [5]]);
  assert.deepEqual(chunk([1, 2, 3, 4], 2), [[1, 2], [3, 4]]);
  assert.deepEqual(chunk(["a", "b"], 5), [["a", "b"]]);
  assert.deepEqual(chunk([1, 2, 3], 1), [[1], [2], [3]]);
  assert.deepEqual(chunk([], 3), []);
});

test("hidden: chunk leaves its input alone", () => {
  const xs = [1, 2, 3];
  const out = chunk(xs, 2);
  out[0].push(99);
  assert.deepEqual(xs, [1, 2, 3]);
});

test("hidden: chunk refuses a size that is not a positive integer", () => {
  assert.throws(() => chunk([1, 2], 0), RangeError);
  assert.throws(() => chunk([1, 2], -1), RangeError);
  assert.throws(() => chunk([1, 2], 1.5), RangeError);
  assert.throws(() => chunk([1, 2], Number.NaN), RangeError);
});
