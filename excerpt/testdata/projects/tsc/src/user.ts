interface User {
  name: string;
}

export const user: User = { name: "ada", age: 36 };
