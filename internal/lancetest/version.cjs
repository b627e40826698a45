// Prints the versions of the Lance oracle, as a smoke test of the setup.
// Scripts here are CommonJS so NODE_PATH can point at the tools folder.
const fs = require("fs");
const path = require("path");
const lancedb = require("@lancedb/lancedb");
const main = require.resolve("@lancedb/lancedb");
let dir = path.dirname(main);
while (!fs.existsSync(path.join(dir, "package.json"))) dir = path.dirname(dir);
const pkg = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
console.log(JSON.stringify({ lancedb: pkg.version, hasConnect: typeof lancedb.connect === "function" }));
