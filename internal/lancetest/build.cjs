// Builds a Lance dataset with real Lance from a JSON spec of steps and prints
// what it made, so Go tests can compare retain's reading of the files with
// Lance's own view. CommonJS so NODE_PATH resolves @lancedb/lancedb.
//
// Argument (JSON):
//   {"dir": "/abs/db", "table": "t", "naming": "v2" | "v1", "steps": [...]}
// Steps (applied in order, "on" selects the table handle: "main" by default
// or a branch name opened by branchCreate/branchCheckout):
//   {"op": "create", "rows": 3}            first step; ids 0..rows-1
//   {"op": "open", "nextId": 9}            or open an existing table (appends go on from nextId)
//   {"op": "add", "rows": 2, "on": "b"}    appends the next ids
//   {"op": "delete", "where": "id = 1"}     makes a deletion file
//   {"op": "update", "where": "id = 2", "values": {"v": "'x'"}}
//   {"op": "createIndex", "column": "id"}   scalar index (btree); "index" picks another kind:
//       "bitmap" or "fts" (on "v"), "ivfFlat" (on "vector", two partitions)
//   {"op": "tagCreate", "name": "t1", "version": 2}
//   {"op": "branchCreate", "name": "b", "from": "main", "version": 3}
//   {"op": "branchCheckout", "name": "b"}
//   {"op": "optimize", "cleanupOlderThanMs": 0, "deleteUnverified": true}
//       cleanupOlderThanMs: cut-off relative to now (0 = now);
//       "cleanupOlderThanAt": epoch ms instead sets an absolute cut-off
//   {"op": "sleep", "ms": 200}             a gap between commit timestamps
//   {"op": "addMany", "count": 300}        count single-row appends (benchmarks)
//   {"op": "drop"}                          drops the table (a later create recreates it)
//   {"op": "migrateManifestPathsV2"}        renames V1 manifests to V2 names (Lance's own migration)
// "vectors": true gives every row a 4-dimensional "vector" column too.
// "storageOptions" (object, optional) is passed to connect, for object stores;
// "files" is only listed for a local dir.
// Output: {"table": path, "steps": [{"op", "version"}...],
//   "versions": {"main": [{"version", "rows", "timestamp", "scanned", "idSum"}...], "<branch>": [...]},
//       rows: countRows; scanned, idSum: from reading every row
//   "tags": {name: {version, branch}}, "branches": {name: {...}},
//   "files": ["relative/path", ...]}   every regular file under the table dir
const fs = require("fs");
const path = require("path");
const lancedb = require("@lancedb/lancedb");

function rows(start, n, vectors) {
  const out = [];
  for (let i = start; i < start + n; i++) {
    const r = { id: i, v: "row-" + i };
    // LanceDB infers a fixed-size float vector for a column named "vector".
    if (vectors) r.vector = [Math.sin(i), Math.cos(i), i % 7, 1];
    out.push(r);
  }
  return out;
}

function indexConfig(kind) {
  switch (kind) {
    case undefined:
      return undefined;
    case "bitmap":
      return { config: lancedb.Index.bitmap() };
    case "fts":
      return { config: lancedb.Index.fts() };
    case "ivfFlat":
      return { config: lancedb.Index.ivfFlat({ numPartitions: 2 }) };
  }
  throw new Error("unknown index kind " + kind);
}

function walk(root) {
  const out = [];
  const rec = (rel) => {
    for (const e of fs.readdirSync(path.join(root, rel), { withFileTypes: true })) {
      const r = rel ? rel + "/" + e.name : e.name;
      if (e.isDirectory()) rec(r);
      else if (e.isFile()) out.push(r);
    }
  };
  rec("");
  return out.sort();
}

// scan reads every row of the checked-out version (every data file, with
// its deletions): the row count and the sum of ids, which countRows alone
// (manifest metadata) would not prove.
async function scan(tbl) {
  const t = await tbl.query().select(["id"]).toArrow();
  let idSum = 0;
  const col = t.getChild("id");
  for (let i = 0; i < t.numRows; i++) idSum += Number(col.get(i));
  return { scanned: t.numRows, idSum };
}

async function versionsOf(tbl) {
  const out = [];
  for (const v of await tbl.listVersions()) {
    await tbl.checkout(v.version);
    out.push({ version: v.version, rows: await tbl.countRows(), timestamp: v.timestamp.toISOString(), ...(await scan(tbl)) });
  }
  await tbl.checkoutLatest();
  return out;
}

// build runs one spec and returns its report. oracle.cjs requires this file
// to run many specs in one process.
async function build(spec) {
  const db = await lancedb.connect(spec.dir, spec.storageOptions ? { storageOptions: spec.storageOptions } : undefined);
  const name = spec.table || "t";
  const handles = {};
  let next = 0;
  const done = [];
  const get = (s) => {
    const h = handles[s.on || "main"];
    if (!h) throw new Error("no table handle " + (s.on || "main") + " for step " + JSON.stringify(s));
    return h;
  };
  for (const s of spec.steps) {
    let version = null;
    switch (s.op) {
      case "create": {
        const opts = {};
        if (spec.naming === "v1") opts.storageOptions = { new_table_enable_v2_manifest_paths: "false" };
        handles.main = await db.createTable(name, rows(0, s.rows || 1, spec.vectors), opts);
        next = s.rows || 1;
        break;
      }
      case "open":
        handles.main = await db.openTable(name);
        next = s.nextId || 0;
        break;
      case "add":
        await get(s).add(rows(next, s.rows || 1, spec.vectors));
        next += s.rows || 1;
        break;
      case "addMany":
        for (let i = 0; i < s.count; i++) {
          await get(s).add(rows(next, 1, spec.vectors));
          next++;
        }
        break;
      case "delete":
        await get(s).delete(s.where);
        break;
      case "update":
        await get(s).update({ where: s.where, values: s.values });
        break;
      case "createIndex":
        await get(s).createIndex(s.column, indexConfig(s.index));
        break;
      case "tagCreate":
        await (await get(s).tags()).create(s.name, s.version);
        break;
      case "branchCreate":
        handles[s.name] = await (await get(s).branches()).create(s.name, s.from || "main", s.version);
        version = await handles[s.name].version();
        break;
      case "branchCheckout":
        handles[s.name] = await (await handles.main.branches()).checkout(s.name);
        break;
      case "drop":
        await db.dropTable(name);
        for (const k of Object.keys(handles)) delete handles[k];
        break;
      case "optimize":
        await get(s).optimize({
          cleanupOlderThan: new Date(s.cleanupOlderThanAt ?? Date.now() - (s.cleanupOlderThanMs || 0)),
          deleteUnverified: !!s.deleteUnverified,
        });
        break;
      case "migrateManifestPathsV2":
        await get(s).migrateManifestPathsV2();
        break;
      case "sleep":
        await new Promise((r) => setTimeout(r, s.ms || 0));
        break;
      default:
        throw new Error("unknown step " + s.op);
    }
    if (version === null && s.op !== "tagCreate" && s.op !== "drop" && s.op !== "sleep") version = await get(s).version();
    done.push({ op: s.op, on: s.on || "main", version });
  }
  const out = { table: spec.dir.replace(/\/$/, "") + "/" + name + ".lance", steps: done, versions: {}, tags: {}, branches: {} };
  if (!spec.skipVersions) {
    for (const [b, h] of Object.entries(handles)) out.versions[b] = await versionsOf(h);
  }
  const tags = await (await handles.main.tags()).list();
  for (const [t, c] of Object.entries(tags)) out.tags[t] = { version: c.version, branch: c.branch ?? null, manifestSize: c.manifestSize };
  const branches = await (await handles.main.branches()).list();
  for (const [b, c] of Object.entries(branches)) {
    out.branches[b] = { parentBranch: c.parentBranch ?? null, parentVersion: c.parentVersion, manifestSize: c.manifestSize };
  }
  out.files = spec.dir.includes("://") ? null : walk(out.table);
  return out;
}

module.exports = { build, rows, walk, versionsOf, scan };

if (require.main === module) {
  build(JSON.parse(process.argv[2]))
    .then((out) => console.log(JSON.stringify(out)))
    .catch((e) => {
      console.error(e && e.stack ? e.stack : String(e));
      process.exit(1);
    });
}
