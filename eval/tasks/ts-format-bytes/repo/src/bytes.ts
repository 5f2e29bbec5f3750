const units = ["B", "KiB", "MiB"];

/** formatBytes writes a byte count for people: 1536 → "1.5 KiB". */
export function formatBytes(n: number): string {
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${Number.isInteger(n) ? n : n.toFixed(1)} ${units[i]}`;
}

/** parseBytes reads what formatBytes writes back into a byte count. */
export function parseBytes(s: string): number {
  const m = /^(\d+(?:\.\d+)?) (B|KiB|MiB)$/.exec(s.trim());
  if (m === null) {
    throw new Error(`not a size: ${s}`);
  }
  return Math.round(Number(m[1]) * 1024 ** units.indexOf(m[2]));
}
