import test from "ava";

test("counts items", (t) => {
  t.is([1, 2].length, 3);
});

test("is empty at first", (t) => {
  t.deepEqual({ items: [] }, { items: [] });
});

test("has a total", (t) => {
  t.true(false);
});

test("throws while adding", () => {
  throw new Error("boom while adding");
});

test("checks out", async () => {
  await Promise.reject(new TypeError("payment rejected"));
});

test("applies a discount", (t) => {
  t.is(10, 9, "the discount is not applied");
});
