import test from "ava";

test("ships the order", (t) => {
  t.fail("no carrier");
});
