const { sum } = require("./sum");

test("adds 1 + 2 to equal 3", () => {
  expect(sum(1, 2)).toBe(3);
});

test("returns an object", () => {
  expect({ total: sum(2, 2), items: ["a"] }).toEqual({ total: 4, items: ["a"] });
});
