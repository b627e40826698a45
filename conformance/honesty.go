package conformance

import (
	"bytes"
	"fmt"

	"github.com/retain-dev/retain/core/storage"
)

// caseHonesty: every capability declared native or gated does what it says
// (checked by read-back, through the driver with no portable-store help);
// every capability declared none answers unsupported and writes nothing.
func caseHonesty(t T, e *Env) {
	caps := e.Store.Capabilities()
	d := e.Store.Driver()
	s := e.Store
	ctx := e.Ctx
	var claims []string
	if c := caps.CreateIfAbsent; c.Level != storage.LevelNone {
		claims = append(claims, fmt.Sprintf("create-if-absent %s", c))
		mustPut(t, s, "h/cia", []byte("first"), storage.PutOptions{})
		_, err := d.Put(ctx, "h/cia", bytes.NewReader([]byte("second")), storage.PutOptions{Mode: storage.PutCreateIfAbsent})
		wantKind(t, err, storage.ErrAlreadyExists, fmt.Sprintf("create-if-absent declared %s, on an existing key", c))
		wantBody(t, s, "h/cia", []byte("first"))
	}
	if c := caps.ReplaceIfVersion; c.Level != storage.LevelNone {
		claims = append(claims, fmt.Sprintf("replace-if-version %s", c))
		v := mustPut(t, s, "h/riv", []byte("first"), storage.PutOptions{})
		mustPut(t, s, "h/riv", []byte("second"), storage.PutOptions{})
		_, err := d.Put(ctx, "h/riv", bytes.NewReader([]byte("third")), storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: v.Version})
		wantKind(t, err, storage.ErrPreconditionFailed, fmt.Sprintf("replace-if-version declared %s, with a stale version", c))
		wantBody(t, s, "h/riv", []byte("second"))
		_, err = d.Put(ctx, "h/riv-missing", bytes.NewReader([]byte("x")), storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: v.Version})
		wantKind(t, err, storage.ErrNotFound, fmt.Sprintf("replace-if-version declared %s, on a missing key", c))
		wantAbsent(t, s, "h/riv-missing")
	}
	if c := caps.DeleteIfVersion; c.Level != storage.LevelNone {
		claims = append(claims, fmt.Sprintf("delete-if-version %s", c))
		v := mustPut(t, s, "h/div", []byte("first"), storage.PutOptions{})
		mustPut(t, s, "h/div", []byte("second"), storage.PutOptions{})
		err := d.Delete(ctx, "h/div", storage.DeleteOptions{IfVersion: v.Version})
		wantKind(t, err, storage.ErrPreconditionFailed, fmt.Sprintf("delete-if-version declared %s, with a stale version", c))
		wantBody(t, s, "h/div", []byte("second"))
	}
	if max := caps.Limits.MaxListPage; max > 0 {
		claims = append(claims, fmt.Sprintf("max list page %d", max))
		for i := range 3 {
			mustPut(t, s, fmt.Sprintf("h/page/%d", i), nil, storage.PutOptions{})
		}
		page, err := d.List(ctx, storage.ListOptions{Prefix: "h/page/", PageSize: 2})
		if err != nil || len(page.Objects) != 2 || !page.More {
			t.Fatalf("list with page size 2 over 3 keys: %d objects, more=%v, %v", len(page.Objects), page.More, err)
		}
	}
	ct := &caseT{}
	ct.run(func(inner T) { testDeclaredNone(inner, s) })
	if ct.failed {
		t.Fatal(ct.reason)
	}
	t.Logf("exercised: %v", claims)
}
