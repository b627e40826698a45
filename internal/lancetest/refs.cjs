// Drives real Lance's tags and branches for retain's ref tests: runs a list
// of operations against one LanceDB table and prints one result per
// operation, so Go tests can check that Lance sees what retain wrote and
// that retain reads what Lance wrote. CommonJS so NODE_PATH resolves
// @lancedb/lancedb.
//
// Argument (JSON): {"dir": "/abs/db", "table": "t", "naming": "v2" | "v1", "ops": [...]}
// Every op may carry "try": true: a failure is then reported as
// {"error": message} instead of failing the script. "on": "<branch>" runs an
// op on a branch's handle (opened with branches().checkout); "table": "<name>"
// on another table of the same database (default: the spec's table).
//   {"op": "create", "rows": 3}                  new table, ids 0..rows-1
//   {"op": "add", "rows": 2, "on": "b"}          appends; -> {"version"}
//   {"op": "delete", "where": "id = 1"}          -> {"version"}
//   {"op": "tagCreate", "name": "t1", "version": 2, "on": "b"}   on a branch handle Lance tags the branch's version
//   {"op": "tagDelete", "name": "t1"}
//   {"op": "tagUpdate", "name": "t1", "version": 1}   rewrites the tag file
//   {"op": "tags"}                               -> {name: {"version", "manifestSize"}}
//   {"op": "tagGet", "name": "t1"}               tags.getVersion: reads only that file -> {"version"}
//   {"op": "branchCreate", "name": "b", "from": "main", "version": 3}  -> {"version"}
//   {"op": "branches"}                           -> {name: {"parentBranch", "parentVersion", "manifestSize"}}
//   {"op": "count", "ref": 2 | "tag", "on": "b"} checkout, countRows, back to latest -> {"version", "rows"}
//   {"op": "countBranch", "name": "b", "version": 3}  -> {"version", "rows"}
//   {"op": "versions", "on": "b"}                -> [{"version", "rows"}]
//   {"op": "tryTagNames", "names": [...]}        tags.create(name, 1) for each -> {name: "" | error}
//   {"op": "tryBranchNames", "names": [...]}     branches.create(name, "main", 1), each on a fresh
//                                                table (a failed create leaves tree/ debris) -> {name: "" | error}
// Output: {"table": "/abs/db/t.lance", "results": [...]}
const path = require("path");
const lancedb = require("@lancedb/lancedb");

function rows(start, n) {
  const out = [];
  for (let i = start; i < start + n; i++) out.push({ id: i, v: "row-" + i });
  return out;
}

function firstLine(e) {
  return String((e && e.message) || e).split("\n")[0];
}

async function main() {
  const spec = JSON.parse(process.argv[2]);
  const db = await lancedb.connect(spec.dir);
  const tableName = spec.table || "t";
  const storageOptions = spec.naming === "v1" ? { new_table_enable_v2_manifest_paths: "false" } : undefined;
  const handles = {};
  let nextId = 0;

  // handle returns the table (or branch) handle an op runs on, opening it once.
  async function handle(on, table) {
    const tn = table || tableName;
    const key = tn + "\u0000" + (on || "main");
    if (!handles[key]) {
      if (!on || on === "main") handles[key] = await db.openTable(tn);
      else handles[key] = await (await (await handle(null, tn)).branches()).checkout(on);
    }
    return handles[key];
  }

  async function run(op) {
    switch (op.op) {
      case "create": {
        const t = await db.createTable(tableName, rows(0, op.rows), storageOptions ? { storageOptions } : {});
        handles[tableName + "\u0000main"] = t;
        nextId = op.rows;
        return { version: await t.version() };
      }
      case "add": {
        const t = await handle(op.on, op.table);
        await t.add(rows(nextId, op.rows));
        nextId += op.rows;
        return { version: await t.version() };
      }
      case "delete": {
        const t = await handle(op.on, op.table);
        await t.delete(op.where);
        return { version: await t.version() };
      }
      case "tagCreate":
        await (await (await handle(op.on, op.table)).tags()).create(op.name, op.version);
        return {};
      case "tagUpdate":
        await (await (await handle(op.on, op.table)).tags()).update(op.name, op.version);
        return {};
      case "tagDelete":
        await (await (await handle(op.on, op.table)).tags()).delete(op.name);
        return {};
      case "tags": {
        const l = await (await (await handle(op.on, op.table)).tags()).list();
        const out = {};
        for (const [k, v] of Object.entries(l)) out[k] = { version: v.version, manifestSize: v.manifestSize };
        return out;
      }
      case "tagGet":
        return { version: await (await (await handle(op.on, op.table)).tags()).getVersion(op.name) };
      case "branchCreate": {
        const b = await (await (await handle(null, op.table)).branches()).create(op.name, op.from || "main", op.version);
        handles[(op.table || tableName) + "\u0000" + op.name] = b;
        return { version: await b.version() };
      }
      case "branches": {
        const l = await (await (await handle(null, op.table)).branches()).list();
        const out = {};
        for (const [k, v] of Object.entries(l)) {
          out[k] = { parentBranch: v.parentBranch ?? null, parentVersion: v.parentVersion, manifestSize: v.manifestSize };
        }
        return out;
      }
      case "count": {
        const t = await handle(op.on, op.table);
        try {
          await t.checkout(op.ref);
          return { version: await t.version(), rows: await t.countRows() };
        } finally {
          await t.checkoutLatest();
        }
      }
      case "countBranch": {
        const b = await (await (await handle(null, op.table)).branches()).checkout(op.name, op.version);
        return { version: await b.version(), rows: await b.countRows() };
      }
      case "versions": {
        const t = await handle(op.on, op.table);
        const out = [];
        for (const v of await t.listVersions()) {
          await t.checkout(v.version);
          out.push({ version: v.version, rows: await t.countRows() });
        }
        await t.checkoutLatest();
        return out;
      }
      case "tryTagNames": {
        const tags = await (await handle(null, op.table)).tags();
        const out = {};
        for (const n of op.names) {
          try {
            await tags.create(n, 1);
            out[n] = "";
          } catch (e) {
            out[n] = firstLine(e) || "error";
          }
        }
        return out;
      }
      case "tryBranchNames": {
        const out = {};
        let i = 0;
        for (const n of op.names) {
          const t = await db.createTable(tableName + "_bn" + i++, rows(0, 1));
          try {
            await (await t.branches()).create(n, "main", 1);
            out[n] = "";
          } catch (e) {
            out[n] = firstLine(e) || "error";
          }
        }
        return out;
      }
      default:
        throw new Error("unknown op " + op.op);
    }
  }

  const results = [];
  for (const op of spec.ops) {
    try {
      results.push(await run(op));
    } catch (e) {
      if (!op.try) throw new Error(`op ${JSON.stringify(op)}: ${e && e.stack ? e.stack : e}`);
      results.push({ error: firstLine(e) || "error" });
    }
  }
  console.log(JSON.stringify({ table: path.join(spec.dir, tableName + ".lance"), results }));
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exit(1);
});
