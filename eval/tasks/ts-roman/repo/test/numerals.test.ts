import test from "node:test";
import assert from "node:assert/strict";
import { fromRoman } from "../src/numerals";

test("fromRoman", () => {
  assert.equal(fromRoman("XIV"), 14);
  assert.equal(fromRoman("MCMXCIV"), 1994);
  assert.throws(() => fromRoman("ABC"), RangeError);
});
