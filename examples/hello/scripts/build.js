'use strict';

// The build: bundle src/ into dist/hello.js with a banner, then load the
// result to prove it works.
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const src = fs.readFileSync(path.join(root, 'src', 'hello.js'), 'utf8');
const out = path.join(root, 'dist', 'hello.js');

fs.mkdirSync(path.dirname(out), { recursive: true });
fs.writeFileSync(out, `// ${pkg.name} ${pkg.version}, built by scripts/build.js\n${src}`);

const built = require(out);
if (built.greet('build') !== 'Hello, build!') {
  console.error('build: the bundle does not work');
  process.exit(1);
}
console.log(`build: wrote dist/hello.js (${fs.statSync(out).size} bytes)`);
