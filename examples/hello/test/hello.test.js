'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { greet, add } = require('../src/hello.js');

test('greets by name', () => {
  assert.equal(greet('gilf'), 'Hello, gilf!');
});

test('greets the world when no name is given', () => {
  assert.equal(greet(''), 'Hello, world!');
  assert.equal(greet(undefined), 'Hello, world!');
});

test('adds numbers', () => {
  assert.equal(add(2, 3), 5);
});

test('refuses what is not a number', () => {
  assert.throws(() => add('2', 3), TypeError);
});
