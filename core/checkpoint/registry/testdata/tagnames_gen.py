#!/usr/bin/env python3
"""Independent implementation of retain's v1 pin tag names (see
checkpoint/registry/tags.go, PinDigest) that writes tagnames.json. The Go test
TestTagNameVectors recomputes every vector with the Go implementation, so the
two must agree. Run from this directory: python3 tagnames_gen.py"""
import base64, hashlib, json, struct

def cid(n):
    b = bytes([n >> 8 & 0xFF, n & 0xFF] + [0] * 13 + [0xA5])
    return base64.b32encode(b).decode().lower().rstrip("=")

def lp(s):
    b = s.encode("utf-8")
    return struct.pack(">Q", len(b)) + b

def u64(n):
    return struct.pack(">Q", n)

def tag(v):
    kind = "m" if v["kind"] == "registry" else "t"
    enc = lp("retain/ogcp/v1") + lp(kind)
    if kind == "t":
        enc += lp(v["table_id"]) + u64(v["incarnation"])
    enc += lp(v["path"]) + lp(v["branch"]) + u64(v["version"]) + lp(v["physical_ref"])
    return "ogcp_v1_%s_%s_%s" % (v["checkpoint_id"], kind, hashlib.sha256(enc).hexdigest())

def lance_ref(version, size, ns, key, objver, txn):
    q = lambda s: json.dumps(s)  # Go %q of these ASCII strings is the same
    return "lance-physref/1 %d %d %d %s %s %s" % (version, size, ns, q(key), q(objver), q(txn))

def lance_ref2(version, size, sha, ns, txn):
    return "lance-physref/2 %d %d %s %d %s" % (version, size, sha, ns, json.dumps(txn))

def v2(n):
    return "%020d.manifest" % (2**64 - 1 - n)

reg_sha = hashlib.sha256(b"example registry snapshot\n").hexdigest()
vectors = [
    {"comment": "registry pin of version 1",
     "kind": "registry", "checkpoint_id": cid(1), "path": "_retain/registry", "branch": "main",
     "version": 1, "physical_ref": "retain-registry/1 1 26 " + reg_sha},
    {"comment": "registry pin, same target, other checkpoint",
     "kind": "registry", "checkpoint_id": cid(2), "path": "_retain/registry", "branch": "main",
     "version": 1, "physical_ref": "retain-registry/1 1 26 " + reg_sha},
    {"comment": "registry pin of a deep version",
     "kind": "registry", "checkpoint_id": cid(1), "path": "_retain/registry", "branch": "main",
     "version": 10000, "physical_ref": "retain-registry/1 10000 26 " + reg_sha},
    {"comment": "table pin on main",
     "kind": "table", "checkpoint_id": cid(1), "table_id": cid(1000), "incarnation": 1,
     "path": "db/a.lance", "branch": "main", "version": 7,
     "physical_ref": lance_ref(7, 1007, 1772366407000000000, "db/a.lance/_versions/" + v2(7), "ov-7", "00000000-0000-4000-8000-000000000007")},
    {"comment": "same table, same version, next incarnation (table recreated): another tag",
     "kind": "table", "checkpoint_id": cid(1), "table_id": cid(1000), "incarnation": 2,
     "path": "db/a.lance", "branch": "main", "version": 7,
     "physical_ref": lance_ref(7, 1007, 1772366407000000000, "db/a.lance/_versions/" + v2(7), "ov-7", "00000000-0000-4000-8000-000000000007")},
    {"comment": "same version, other physical ref (other commit at the same key)",
     "kind": "table", "checkpoint_id": cid(1), "table_id": cid(1000), "incarnation": 1,
     "path": "db/a.lance", "branch": "main", "version": 7,
     "physical_ref": lance_ref(7, 1007, 1772366499000000000, "db/a.lance/_versions/" + v2(7), "ov-7b", "00000000-0000-4000-8000-0000000000ff")},
    {"comment": "table pin, format-2 token: the commit's content digest, wherever the manifest is stored",
     "kind": "table", "checkpoint_id": cid(1), "table_id": cid(1000), "incarnation": 1,
     "path": "db/a.lance", "branch": "main", "version": 7,
     "physical_ref": lance_ref2(7, 1007, hashlib.sha256(b"manifest of v7").hexdigest(), 1772366407000000000, "00000000-0000-4000-8000-000000000007")},
    {"comment": "format-2, same version, other content (the table was recreated): another tag",
     "kind": "table", "checkpoint_id": cid(1), "table_id": cid(1000), "incarnation": 1,
     "path": "db/a.lance", "branch": "main", "version": 7,
     "physical_ref": lance_ref2(7, 1007, hashlib.sha256(b"manifest of v7, recreated").hexdigest(), 1772366499000000000, "00000000-0000-4000-8000-0000000000ff")},
    {"comment": "table pin on a branch with '/'",
     "kind": "table", "checkpoint_id": cid(3), "table_id": cid(1001), "incarnation": 1,
     "path": "db/b.lance", "branch": "team/exp", "version": 3,
     "physical_ref": lance_ref(3, 512, 0, "db/b.lance/tree/team/exp/_versions/" + v2(3), "", "")},
    {"comment": "length prefixes: path 'ab' + branch 'c' ...",
     "kind": "table", "checkpoint_id": cid(4), "table_id": cid(1002), "incarnation": 1,
     "path": "ab", "branch": "cx", "version": 1, "physical_ref": "t"},
    {"comment": "... and path 'abc' + branch 'x' differ",
     "kind": "table", "checkpoint_id": cid(4), "table_id": cid(1002), "incarnation": 1,
     "path": "abc", "branch": "x", "version": 1, "physical_ref": "t"},
    {"comment": "non-ASCII path and branch, u64 max version",
     "kind": "table", "checkpoint_id": cid(5), "table_id": cid(1003), "incarnation": 18446744073709551615,
     "path": "données/t.lance", "branch": "ünï", "version": 18446744073709551615, "physical_ref": "tok \"quoted\""},
]
for v in vectors:
    v["tag"] = tag(v)
with open("tagnames.json", "w") as f:
    json.dump({"scheme": "ogcp_v1_<checkpoint id>_<m|t>_<sha256 hex of PinDigest's encoding>; generated by tagnames_gen.py",
               "vectors": vectors}, f, indent=1, ensure_ascii=False)
    f.write("\n")
