/** toCamelCase turns "hello_world", "hello-world" or "hello world" into "helloWorld". */
export function toCamelCase(input: string): string {
  const parts = input.split(/[_\- ]/);
  return parts
    .map((p, i) => (i === 0 ? p.toLowerCase() : p[0].toUpperCase() + p.slice(1).toLowerCase()))
    .join("");
}

/** toSnakeCase turns "helloWorld" into "hello_world". */
export function toSnakeCase(input: string): string {
  return input.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toLowerCase();
}
