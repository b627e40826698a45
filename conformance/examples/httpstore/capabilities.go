package httpstore

import (
	"context"
	"net/http"
	"strconv"

	"github.com/retain-dev/retain/conformance/examples/httpstore/server"
	"github.com/retain-dev/retain/core/storage"
)

// probe checks that the bucket exists and reads the server's limits, so the
// driver declares what this server really enforces. A HEAD writes nothing,
// so a read-only open probes too.
func (d *Driver) probe(ctx context.Context) error {
	req, err := d.newRequest(ctx, http.MethodHead, d.bucketURL(), nil)
	if err != nil {
		return d.mapErr("open", "", err)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return d.mapErr("open", "", err)
	}
	resp.Body.Close()
	if err := d.statusErr("open", "", resp, storage.PutOverwrite); err != nil {
		return err
	}
	// A server that does not say keeps the documented defaults.
	d.limits = storage.Limits{
		MaxObjectSize:  headerInt(resp, server.MaxObjectSizeHeader, server.DefaultMaxObjectSize),
		MaxListPage:    int(headerInt(resp, server.MaxListPageHeader, server.DefaultMaxListPage)),
		MaxDeleteBatch: int(headerInt(resp, server.MaxDeleteBatchHeader, server.DefaultMaxDeleteBatch)),
	}
	return nil
}

func headerInt(resp *http.Response, name string, def int64) int64 {
	n, err := strconv.ParseInt(resp.Header.Get(name), 10, 64)
	if err != nil || n <= 0 {
		return def
	}
	return n
}

// Capabilities: the server decides every condition under one lock, for
// every client of the store, so the three conditional operations are
// native and reach globally. It offers no lock a client could hold across
// requests, so the adapter declares no gates rather than invent one
// (a lock object with create-if-absent would need expiry to survive a dead
// holder; the retention claim already is exactly that, with takeover rules).
func (d *Driver) Capabilities(ctx context.Context) (storage.Capabilities, error) {
	if err := ctx.Err(); err != nil {
		return storage.Capabilities{}, d.mapErr("capabilities", "", err)
	}
	native := storage.Capability{Level: storage.LevelNative, Scope: storage.ScopeGlobal,
		Reason: "the server checks the condition and writes under one lock"}
	caps := storage.Capabilities{
		CreateIfAbsent:   native, // PUT with If-None-Match: *
		ReplaceIfVersion: native, // PUT with If-Match
		DeleteIfVersion:  native, // DELETE with If-Match
		Limits:           d.limits,
		OrderedList:      true, // the server sorts keys bytewise
		ListAfterWrite:   true, // one in-memory map: a finished write is listed
		UniqueVersions:   true, // versions are a per-server-start epoch and a counter
		Notes: []string{
			"server " + d.base + ", bucket " + d.bucket,
			"no gates: the server has no lock primitive, and every single-object condition is native",
		},
	}
	if d.readOnly {
		none := storage.Capability{Level: storage.LevelNone, Scope: storage.ScopeNone, Reason: "opened read-only"}
		caps.CreateIfAbsent, caps.ReplaceIfVersion, caps.DeleteIfVersion = none, none, none
		caps.ReadOnly = true
		caps.Notes = append(caps.Notes, "opened read-only: every write is refused")
	}
	return caps, nil
}
