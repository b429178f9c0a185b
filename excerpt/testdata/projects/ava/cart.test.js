import test from "ava";

test("counts items", (t) => {
  t.is([1, 2].length, 3);
});

test("is empty at first", (t) => {
  t.deepEqual({ items: [] }, { items: [] });
});
