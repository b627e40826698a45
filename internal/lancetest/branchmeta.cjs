// Shows what real Lance exposes of a table's branches through LanceDB's
// branches API, and whether each opens: for retain's branch lifecycle
// tests (retain keeps a branch's lifecycle and metadata in its branch
// file's metadata map; this reports whether Lance hands that map out, and
// that Lance still lists and opens the branch). CommonJS so NODE_PATH
// resolves @lancedb/lancedb.
//
// Argument (JSON): {"dir": "/abs/db", "table": "t"}
// Output: {"branches": {name: {
//            "exposed": {property: value, ...},  every property list()'s value
//                                                 carries (own and prototype getters)
//            "version": n, "rows": n}}}          checkout(name): latest version, countRows
// A branch that does not open reports {"exposed", "error": message}.
const lancedb = require("@lancedb/lancedb");

function props(v) {
  const names = new Set();
  for (let o = v; o && o !== Object.prototype; o = Object.getPrototypeOf(o)) {
    for (const n of Object.getOwnPropertyNames(o)) if (n !== "constructor") names.add(n);
  }
  const out = {};
  for (const n of [...names].sort()) {
    const x = v[n];
    if (typeof x === "function") continue;
    out[n] = typeof x === "bigint" ? Number(x) : x === undefined ? null : x;
  }
  return out;
}

async function main() {
  const spec = JSON.parse(process.argv[2]);
  const db = await lancedb.connect(spec.dir);
  const t = await db.openTable(spec.table || "t");
  const branches = await t.branches();
  const out = {};
  for (const [name, v] of Object.entries(await branches.list())) {
    const row = { exposed: props(v) };
    try {
      const b = await branches.checkout(name);
      row.version = await b.version();
      row.rows = await b.countRows();
    } catch (e) {
      row.error = String((e && e.message) || e).split("\n")[0];
    }
    out[name] = row;
  }
  console.log(JSON.stringify({ branches: out }));
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exit(1);
});
