const assert = require("node:assert");

describe("cart", function () {
  it("counts items", function () {
    assert.strictEqual([1, 2].length, 3);
  });
  it("is empty at first", function () {
    assert.deepStrictEqual({ items: [] }, { items: [] });
  });
  it("has a total", function () {
    assert.deepStrictEqual({ total: 3, items: ["a"] }, { total: 4, items: ["a"] });
  });
});
