/** unique returns the items of xs without repeats, in the order they first appear. */
export function unique<T>(xs: readonly T[]): T[] {
  const seen = new Set<T>();
  const out: T[] = [];
  for (const x of xs) {
    if (!seen.has(x)) {
      seen.add(x);
      out.push(x);
    }
  }
  return out;
}

/** last returns the last item of xs, or undefined when it is empty. */
export function last<T>(xs: readonly T[]): T | undefined {
  return xs.length === 0 ? undefined : xs[xs.length - 1];
}
