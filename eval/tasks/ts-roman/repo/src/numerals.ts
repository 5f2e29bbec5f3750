const values: Record<string, number> = { I: 1, V: 5, X: 10, L: 50, C: 100, D: 500, M: 1000 };

/** fromRoman reads a Roman numeral such as "MCMXCIV" (1994). */
export function fromRoman(s: string): number {
  let total = 0;
  for (let i = 0; i < s.length; i++) {
    const v = values[s[i]];
    if (v === undefined) {
      throw new RangeError(`not a Roman numeral: ${s}`);
    }
    const next = values[s[i + 1]] ?? 0;
    total += v < next ? -v : v;
  }
  return total;
}
