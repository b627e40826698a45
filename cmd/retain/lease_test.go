package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/lease"
	"github.com/retain-dev/retain/internal/lancetest"
)

type lanceVerify struct {
	Listed  map[string][]int `json:"listed"`
	TagRows map[string]struct {
		Rows    int `json:"rows"`
		Scanned int `json:"scanned"`
	} `json:"tagRows"`
	Errors []string `json:"errors"`
	Error  string   `json:"error"`
}

func verifyWithLance(t *testing.T, db, table string, versions []int, tags []string) lanceVerify {
	t.Helper()
	var out struct {
		Results []lanceVerify `json:"results"`
	}
	lancetest.Node(t, "oracle.cjs", map[string]any{"jobs": []map[string]any{{"kind": "verify", "dir": db, "table": table,
		"versions": map[string][]int{"main": versions}, "tags": tags}}}, &out)
	if len(out.Results) != 1 {
		t.Fatalf("oracle: %+v", out)
	}
	r := out.Results[0]
	if r.Error != "" || len(r.Errors) > 0 {
		t.Fatalf("real Lance on %s: %s %v", table, r.Error, r.Errors)
	}
	return r
}

// A reader's lease keeps its version through a cleanup, as real Lance
// sees (checkout of the version and of the lease tag, full scans); once
// released, the next cleanup removes it. The CLI's refusals say what to do.
func TestLeaseThroughTheCLIJudgedByLance(t *testing.T) {
	db := fixtureDB(t, "v2-appends")
	uri := db + "/v2-appends.lance"
	if _, errs, code := retain(t, "lease", "acquire", uri); code != 2 || !strings.Contains(errs, "--ttl is required") {
		t.Fatalf("acquire without --ttl: %d %s", code, errs)
	}
	if _, errs, code := retain(t, "lease", "acquire", uri, "--ttl", "30d"); code != 2 || !strings.Contains(errs, "at most 168h") {
		t.Fatalf("acquire too long: %d %s", code, errs)
	}
	out, errs, code := retain(t, "lease", "acquire", uri, "--version", "1", "--ttl", "30m", "--actor", "scanner", "--json")
	if code != 0 {
		t.Fatalf("acquire: %d %s", code, errs)
	}
	var l lease.Lease
	if err := json.Unmarshal([]byte(out), &l); err != nil || l.Version != 1 || l.Holder != "scanner" {
		t.Fatalf("acquire: %v %s", err, out)
	}
	out, _, _ = retain(t, "lease", "list", uri)
	if !regexp.MustCompile(string(l.ID) + `\s+main\s+1\s+\S+\s+scanner`).MatchString(out) {
		t.Fatalf("list:\n%s", out)
	}
	// A user cannot delete the lease's tag with the tag commands.
	if _, errs, code := retain(t, "tag", "delete", l.Tag, uri); code == 0 {
		t.Fatalf("tag delete of a lease: %s", errs)
	}
	if _, errs, code := retain(t, "cleanup", "run", db, "--keep-last", "1", "--confirm-write-outage"); code != 0 {
		t.Fatalf("cleanup with a lease: %d %s", code, errs)
	}
	r := verifyWithLance(t, db, "v2-appends", []int{1, 3}, []string{l.Tag})
	if got := r.Listed["main"]; len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Fatalf("Lance lists %v after cleanup with v1 leased, want [1 3]", got)
	}
	if tr := r.TagRows[l.Tag]; tr.Rows == 0 || tr.Scanned != tr.Rows {
		t.Fatalf("Lance reads the leased version as %+v", tr)
	}
	if out, errs, code := retain(t, "lease", "release", string(l.ID), uri); code != 0 || !strings.Contains(out, "released lease") {
		t.Fatalf("release: %d %s %s", code, out, errs)
	}
	if _, errs, code := retain(t, "lease", "renew", string(l.ID), uri, "--ttl", "1h"); code != 1 || !strings.Contains(errs, "acquire a new one") {
		t.Fatalf("renew after release: %d %s", code, errs)
	}
	if _, errs, code := retain(t, "cleanup", "run", db, "--keep-last", "1", "--confirm-write-outage"); code != 0 {
		t.Fatalf("cleanup after release: %d %s", code, errs)
	}
	r = verifyWithLance(t, db, "v2-appends", []int{3}, nil)
	if got := r.Listed["main"]; len(got) != 1 || got[0] != 3 {
		t.Fatalf("Lance lists %v after the lease was released, want [3]", got)
	}
}
