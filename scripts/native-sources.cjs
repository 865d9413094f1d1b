// Lists every C++ translation unit of the addon for binding.gyp (CMakeLists.txt globs the same
// set), so adding a codec file never needs a build-file edit. Fuzz and test harnesses live in
// native/fuzz and are not part of the addon.
'use strict';
const fs = require('fs');
const path = require('path');
const root = path.join(__dirname, '..', 'native');
const out = [];
(function walk(dir) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) { if (e.name !== 'fuzz') walk(p); }
    else if (e.name.endsWith('.cc')) out.push(path.relative(path.join(__dirname, '..'), p));
  }
})(root);
process.stdout.write(out.join(' '));
