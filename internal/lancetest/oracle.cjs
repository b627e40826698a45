// Runs many jobs against real Lance in one Node process, so Go tests that
// judge retain's cleanup (differential runs over dozens of workloads, the
// readability checks afterwards, the benchmark) pay Node's and LanceDB's
// start-up once. CommonJS so NODE_PATH resolves @lancedb/lancedb.
//
// Argument (JSON): {"jobs": [...]}; each job runs in order and its failure
// is reported as {"error": message} in its slot, never aborting the rest.
//   {"kind": "build", ...}        a build.cjs spec (dir, table, naming, steps, ...)
//                                  -> build.cjs's report
//   {"kind": "optimize", "dir", "table", "on": "b", "olderThanAt": epochMs,
//    "deleteUnverified": bool}     Lance's optimize: compaction, its own cleanup,
//                                  index optimization
//                                  -> {"before", "after", "ms", "stats",
//                                      "rssBeforeKb" (table open), "maxRssKb" (peak so far)}
//   {"kind": "verify", "dir", "table", "versions": {"main": [1, 3], "b": [4]},
//    "tags": ["t1"], "append": ["main", "b"]}
//       per branch: listVersions, then checkout of each version asked for,
//       countRows, a full scan (every data file with its deletions: row count
//       and sum of ids) and a filtered scan (through a scalar index if any);
//       per tag: checkout(tag), countRows and a full scan; then an append on
//       each branch named in "append", read back at its latest version
//       -> {"listed": {branch: [v...]},
//           "rows": {branch: {v: {"rows", "scanned", "idSum", "filtered"}}},
//           "tagRows": {tag: {"rows", "scanned", "idSum"}}, "errors": [string...],
//           "appended": {branch: {"version", "rows", "before", "scanned", "idSum"}}}
//   {"kind": "open", "dir", "table", "on"}  opens the table, nothing more
//                                  (what opening costs) -> {"version"}
// Every job may carry "storageOptions": LanceDB's for an object store
// ("dir" is then its URI, e.g. s3://bucket/prefix).
// Output: {"results": [...], "maxRssKb": peak resident set of this process}
const lancedb = require("@lancedb/lancedb");
const { build, rows, scan } = require("./build.cjs");

function firstLine(e) {
  return String((e && e.message) || e).split("\n")[0];
}

async function open(job, branch) {
  // storageOptions (object store settings: endpoint, keys, ...) let a job
  // open a table on an object store, e.g. through a latency proxy.
  const db = await lancedb.connect(job.dir, job.storageOptions ? { storageOptions: job.storageOptions } : undefined);
  const main = await db.openTable(job.table || "t");
  if (!branch || branch === "main") return main;
  return await (await main.branches()).checkout(branch);
}

async function optimize(job) {
  const t = await open(job, job.on);
  const before = await t.version();
  const rssBeforeKb = Math.round(process.memoryUsage().rss / 1024);
  const start = process.hrtime.bigint();
  const stats = await t.optimize({
    cleanupOlderThan: new Date(job.olderThanAt ?? Date.now()),
    deleteUnverified: !!job.deleteUnverified,
  });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  return { before, after: await t.version(), ms, stats, rssBeforeKb, maxRssKb: process.resourceUsage().maxRSS };
}

async function verify(job) {
  const out = { listed: {}, rows: {}, tagRows: {}, errors: [], appended: {} };
  for (const [branch, want] of Object.entries(job.versions || {})) {
    let t;
    try {
      t = await open(job, branch);
      out.listed[branch] = (await t.listVersions()).map((v) => v.version);
    } catch (e) {
      out.errors.push(`${branch}: open/listVersions: ${firstLine(e)}`);
      continue;
    }
    out.rows[branch] = {};
    for (const v of want) {
      try {
        await t.checkout(v);
        const s = await scan(t);
        out.rows[branch][v] = { rows: await t.countRows(), ...s, filtered: (await t.query().where("id >= 0").select(["id"]).toArrow()).numRows };
      } catch (e) {
        out.errors.push(`${branch} v${v}: ${firstLine(e)}`);
      }
    }
  }
  for (const tag of job.tags || []) {
    try {
      const t = await open(job, "main");
      await t.checkout(tag);
      out.tagRows[tag] = { rows: await t.countRows(), ...(await scan(t)) };
    } catch (e) {
      out.errors.push(`tag ${tag}: ${firstLine(e)}`);
    }
  }
  for (const branch of job.append || []) {
    try {
      const t = await open(job, branch);
      const before = await t.countRows();
      await t.add(rows(1000000 + before, 1));
      out.appended[branch] = { version: await t.version(), rows: await t.countRows(), before, ...(await scan(t)) };
    } catch (e) {
      out.errors.push(`${branch}: append: ${firstLine(e)}`);
    }
  }
  return out;
}

async function main() {
  const spec = JSON.parse(process.argv[2]);
  const results = [];
  for (const job of spec.jobs) {
    try {
      switch (job.kind) {
        case "build":
          results.push(await build(job));
          break;
        case "optimize":
          results.push(await optimize(job));
          break;
        case "verify":
          results.push(await verify(job));
          break;
        case "open":
          results.push({ version: await (await open(job, job.on)).version() });
          break;
        default:
          throw new Error("unknown job kind " + job.kind);
      }
    } catch (e) {
      results.push({ error: firstLine(e) });
    }
  }
  console.log(JSON.stringify({ results, maxRssKb: process.resourceUsage().maxRSS }));
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
