/** parseQuery reads "a=1&b=two" into { a: "1", b: "two" }; a leading "?" is ignored. */
export function parseQuery(query: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of query.replace(/^\?/, "").split("&")) {
    const [key, value] = pair.split("=");
    out[key] = value;
  }
  return out;
}

/** buildQuery writes { a: "1", b: "x y" } as "a=1&b=x%20y", keys in the order given. */
export function buildQuery(params: Record<string, string>): string {
  return Object.entries(params)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
    .join("&");
}
