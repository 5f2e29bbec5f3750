import test from "node:test";
import assert from "node:assert/strict";
import { formatBytes, parseBytes } from "../src/bytes";

test("formatBytes", () => {
  assert.equal(formatBytes(0), "0 B");
  assert.equal(formatBytes(1536), "1.5 KiB");
  assert.equal(formatBytes(2 * 1024 * 1024), "2 MiB");
});

test("parseBytes", () => {
  assert.equal(parseBytes("1.5 KiB"), 1536);
});
