import test from "node:test";
import assert from "node:assert/strict";
import { toCamelCase, toSnakeCase } from "../src/case";

test("toCamelCase joins words", () => {
  assert.equal(toCamelCase("hello_world"), "helloWorld");
  assert.equal(toCamelCase("hello-world"), "helloWorld");
  assert.equal(toCamelCase("Hello World"), "helloWorld");
});

test("toSnakeCase splits words", () => {
  assert.equal(toSnakeCase("helloWorld"), "hello_world");
});
