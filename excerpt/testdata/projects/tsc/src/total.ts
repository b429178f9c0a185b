export function total(prices: number[]): number {
  let sum: number = 0;
  for (const p of prices) {
    sum += p;
  }
  const label: number = "total";
  return sum + label;
}
