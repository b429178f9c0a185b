function addItem(cart, item) {
  const unused = 1;
  if (item == undefined) {
    return cart;
  }
  return cart.concat([itme]);
}

module.exports = { addItem };
