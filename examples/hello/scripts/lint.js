'use strict';

// A lint with node alone: every .js file must compile, use strict mode,
// and have no trailing whitespace or tabs.
const fs = require('node:fs');
const path = require('node:path');
const vm = require('node:vm');

const root = path.resolve(__dirname, '..');
const dirs = ['src', 'test', 'scripts'];
const problems = [];
let files = 0;

for (const dir of dirs) {
  for (const name of fs.readdirSync(path.join(root, dir)).sort()) {
    if (!name.endsWith('.js')) continue;
    const rel = path.join(dir, name);
    const text = fs.readFileSync(path.join(root, rel), 'utf8');
    files++;
    try {
      new vm.Script(text, { filename: rel });
    } catch (err) {
      problems.push(`${rel}: does not compile: ${err.message}`);
    }
    if (!text.startsWith("'use strict';")) problems.push(`${rel}:1: missing 'use strict'`);
    text.split('\n').forEach((line, i) => {
      if (/[ \t]+$/.test(line)) problems.push(`${rel}:${i + 1}: trailing whitespace`);
      if (line.includes('\t')) problems.push(`${rel}:${i + 1}: tab character`);
    });
  }
}

if (problems.length > 0) {
  console.error(problems.join('\n'));
  console.error(`lint: ${problems.length} problem(s) in ${files} files`);
  process.exit(1);
}
console.log(`lint: ${files} files clean`);
