const test = require("node:test");
const assert = require("node:assert");

test("counts items", () => {
  assert.strictEqual([1, 2].length, 3);
});

test("is empty at first", () => {
  assert.deepStrictEqual({ items: [] }, { items: [] });
});

test("has a total", () => {
  assert.deepStrictEqual({ total: 3 }, { total: 4 });
});
