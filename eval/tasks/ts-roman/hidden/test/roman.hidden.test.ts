import test from "node:test";
import assert from "node:assert/strict";
import { fromRoman, toRoman } from "../src/numerals";

test("hidden: toRoman writes numerals", () => {
  const cases: Array<[number, string]> = [
    [1, "I"], [4, "IV"], [9, "IX"], [14, "XIV"], [40, "XL"], [90, "XC"], [400, "CD"],
    [944, "CMXLIV"], [1994, "MCMXCIV"], [2024, "MMXXIV"], [3999, "MMMCMXCIX"],
  ];
  for (const [n, want] of cases) {
    assert.equal(toRoman(n), want, `toRoman(${n})`);
  }
});

test("hidden: round trip", () => {
  for (let n = 1; n <= 3999; n += 7) {
    assert.equal(fromRoman(toRoman(n)), n);
  }
});

test("hidden: out of range", () => {
  for (const n of [0, -1, 4000, 2.5, Number.NaN]) {
    assert.throws(() => toRoman(n), RangeError, `toRoman(${n})`);
  }
});
