// Runs LanceDB's optimize() and commits on an existing table and reports
// what Lance did: whether optimize threw, and the table's fragments,
// unindexed rows and versions after each step. For the Go tests of how
// retain's pins and Lance's own cleanup live side by side.
//
// Argument (JSON):
//   {"dir": "/abs/db", "table": "t", "index": "id_idx", "ops": [...]}
// Ops (in order, one process, one table handle):
//   {"op": "add", "rows": 2}                 appends rows with ids from 1000 up
//   {"op": "optimize"}                       LanceDB's default (7-day cut-off)
//   {"op": "optimize", "cleanupOlderThanAt": epochMs}   an absolute cut-off
//   {"op": "setConfig", "config": {"k": "v"}}
//       adds entries to the latest manifest's config map (field 16), the
//       way Lance's update_config would: LanceDB 0.39's Node API has no
//       config call. Lance's later commits carry the map forward and act
//       on it. The process reopens the table afterwards.
// Output: {"results": [{"op", "threw": message|null, "version",
//   "fragments", "unindexedRows", "versions": [n...]}...]}
const fs = require("fs");
const path = require("path");
const lancedb = require("@lancedb/lancedb");

function varint(n) {
  const o = [];
  while (n > 127) {
    o.push((n & 127) | 128);
    n >>>= 7;
  }
  o.push(n);
  return Buffer.from(o);
}
const bytesField = (num, b) => Buffer.concat([varint((num << 3) | 2), varint(b.length), b]);

// setConfig appends map entries to the Manifest message, which is the last
// section before the footer (u64 offset, u16 major, u16 minor, "LANC"), so
// only its length prefix changes.
function setConfig(table, config) {
  const vdir = path.join(table, "_versions");
  const names = fs.readdirSync(vdir).filter((n) => n.endsWith(".manifest"));
  // V2 names count down from u64 max: the newest sorts first.
  const latest = names.sort()[0];
  const file = path.join(vdir, latest);
  const b = fs.readFileSync(file);
  const body = b.length - 16;
  const pos = Number(b.readBigUInt64LE(body));
  const len = b.readUInt32LE(pos);
  if (pos + 4 + len !== body) throw new Error(file + ": the manifest section does not end at the footer");
  const extra = Buffer.concat(
    Object.entries(config).map(([k, v]) =>
      bytesField(16, Buffer.concat([bytesField(1, Buffer.from(k)), bytesField(2, Buffer.from(v))])),
    ),
  );
  const out = Buffer.concat([b.subarray(0, body), extra, b.subarray(body)]);
  out.writeUInt32LE(len + extra.length, pos);
  fs.writeFileSync(file, out);
}

async function state(tbl, index) {
  const s = { version: await tbl.version(), fragments: (await tbl.stats()).fragmentStats.numFragments };
  if (index) s.unindexedRows = (await tbl.indexStats(index)).numUnindexedRows;
  s.versions = (await tbl.listVersions()).map((v) => v.version);
  return s;
}

async function main(spec) {
  const name = spec.table || "t";
  let tbl = await (await lancedb.connect(spec.dir)).openTable(name);
  let next = 1000;
  const results = [];
  for (const op of spec.ops) {
    let threw = null;
    switch (op.op) {
      case "add": {
        const rows = [];
        for (let i = 0; i < (op.rows || 1); i++) rows.push({ id: next, v: "row-" + next++ });
        await tbl.add(rows);
        break;
      }
      case "optimize":
        try {
          await tbl.optimize(op.cleanupOlderThanAt === undefined ? undefined : { cleanupOlderThan: new Date(op.cleanupOlderThanAt) });
        } catch (e) {
          threw = String(e && e.message ? e.message : e);
        }
        break;
      case "setConfig":
        setConfig(path.join(spec.dir, name + ".lance"), op.config);
        tbl = await (await lancedb.connect(spec.dir)).openTable(name);
        break;
      default:
        throw new Error("unknown op " + op.op);
    }
    results.push({ op: op.op, threw, ...(await state(tbl, spec.index)) });
  }
  return { results };
}

main(JSON.parse(process.argv[2]))
  .then((out) => console.log(JSON.stringify(out)))
  .catch((e) => {
    console.error(e && e.stack ? e.stack : String(e));
    process.exit(1);
  });
