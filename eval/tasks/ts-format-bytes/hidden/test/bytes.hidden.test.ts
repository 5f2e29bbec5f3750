import test from "node:test";
import assert from "node:assert/strict";
import { formatBytes, parseBytes } from "../src/bytes";

test("hidden: units up to TiB", () => {
  assert.equal(formatBytes(1023), "1023 B");
  assert.equal(formatBytes(1024), "1 KiB");
  assert.equal(formatBytes(5 * 1024 ** 3), "5 GiB");
  assert.equal(formatBytes(1.25 * 1024 ** 3), "1.3 GiB");
  assert.equal(formatBytes(3 * 1024 ** 4), "3 TiB");
  assert.equal(formatBytes(2 * 1024 ** 5), "2048 TiB");
});

test("hidden: rounding up to the next unit", () => {
  assert.equal(formatBytes(1048575), "1 MiB");
  assert.equal(formatBytes(1024 ** 3 - 1), "1 GiB");
  assert.equal(formatBytes(1023.97 * 1024), "1 MiB");
  assert.equal(formatBytes(1023.9 * 1024), "1023.9 KiB");
});

test("hidden: parseBytes reads the new units", () => {
  assert.equal(parseBytes("5 GiB"), 5 * 1024 ** 3);
  assert.equal(parseBytes("3 TiB"), 3 * 1024 ** 4);
});
