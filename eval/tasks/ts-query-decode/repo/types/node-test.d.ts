// The parts of Node's test runner and assert module the tests use: the toolchain here has
// TypeScript but not @types/node.
declare module "node:test" {
  function test(name: string, fn: () => void | Promise<void>): Promise<void>;
  export = test;
}

declare module "node:assert/strict" {
  function assert(value: unknown, message?: string): asserts value;
  namespace assert {
    function ok(value: unknown, message?: string): asserts value;
    function equal(actual: unknown, expected: unknown, message?: string): void;
    function notEqual(actual: unknown, expected: unknown, message?: string): void;
    function deepEqual(actual: unknown, expected: unknown, message?: string): void;
    function throws(fn: () => unknown, expected?: RegExp | Function | object, message?: string): void;
  }
  export = assert;
}
