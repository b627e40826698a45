// Builds the lancedb-0.22 fixtures with real LanceDB 0.22.3 (npm
// @lancedb/lancedb, the last LanceDB whose Lance writes manifest footer
// format 0.1) and prints what LanceDB itself read of every version.
// CommonJS so NODE_PATH resolves @lancedb/lancedb. Run by
// TestRegenerateLanceDB022Fixtures (old_lancedb_test.go), which installs
// LanceDB 0.22.3 under .tools/ and copies the tables here.
//
// Argument (JSON): {"dir": "/abs/db"}
// Output: {"lancedb": version, "tables": {name: {"naming": "v1"|"v2",
//   "versions": [{"version", "rows", "scanned", "idSum"}...],
//   "tags": {name: version}}}}
const fs = require("fs");
const path = require("path");
const lancedb = require("@lancedb/lancedb");

function lancedbVersion() {
  let dir = path.dirname(require.resolve("@lancedb/lancedb"));
  while (!fs.existsSync(path.join(dir, "package.json"))) dir = path.dirname(dir);
  return JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")).version;
}

function rows(start, n) {
  const out = [];
  for (let i = start; i < start + n; i++) out.push({ id: i, v: "row-" + i });
  return out;
}

async function scan(tbl) {
  const t = await tbl.query().select(["id"]).toArrow();
  let idSum = 0;
  const col = t.getChild("id");
  for (let i = 0; i < t.numRows; i++) idSum += Number(col.get(i));
  return { scanned: t.numRows, idSum };
}

async function report(tbl) {
  const versions = [];
  for (const v of await tbl.listVersions()) {
    await tbl.checkout(v.version);
    versions.push({ version: v.version, rows: await tbl.countRows(), ...(await scan(tbl)) });
  }
  await tbl.checkoutLatest();
  const tags = {};
  for (const [name, t] of Object.entries(await (await tbl.tags()).list())) tags[name] = t.version;
  return { naming: (await tbl.usesV2ManifestPaths()) ? "v2" : "v1", versions, tags };
}

async function main() {
  const spec = JSON.parse(process.argv[2]);
  const out = { lancedb: lancedbVersion(), tables: {} };

  // LanceDB 0.22's default: V1 manifest names ({N}.manifest). Appends, a
  // deletion file, a tag in the old minimal form, a scalar index (its
  // metadata lists no files), an update (new fragment and deletion).
  let db = await lancedb.connect(spec.dir);
  let t = await db.createTable("v1", rows(0, 3));
  await t.add(rows(3, 2));
  await t.delete("id = 1");
  await (await t.tags()).create("old-tag", 2);
  await t.createIndex("id");
  await t.add(rows(5, 2));
  await t.update({ where: "id = 3", values: { v: "'changed'" } });
  out.tables.v1 = await report(t);

  // V2 manifest names, as LanceDB 0.39 creates tables.
  db = await lancedb.connect(spec.dir, { storageOptions: { new_table_enable_v2_manifest_paths: "true" } });
  t = await db.createTable("v2", rows(0, 4));
  await t.add(rows(4, 2));
  await t.delete("id = 0");
  await t.add(rows(6, 1));
  out.tables.v2 = await report(t);

  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
