'use strict';

// greet returns the greeting for name; an empty name greets the world.
function greet(name) {
  const who = String(name ?? '').trim();
  return `Hello, ${who === '' ? 'world' : who}!`;
}

// add returns the sum of two finite numbers.
function add(a, b) {
  if (!Number.isFinite(a) || !Number.isFinite(b)) {
    throw new TypeError('add takes two finite numbers');
  }
  return a + b;
}

module.exports = { greet, add };
