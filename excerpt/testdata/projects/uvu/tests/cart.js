const { test } = require("uvu");
const assert = require("uvu/assert");

test("counts items", () => {
  assert.is([1, 2].length, 3);
});

test("is empty at first", () => {
  assert.equal({ items: [] }, { items: [] });
});

test.run();
