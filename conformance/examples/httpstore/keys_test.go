package httpstore

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/retain-dev/retain/conformance/examples/httpstore/server"
	"github.com/retain-dev/retain/core/storage"
)

// TestKeysWithURLCharacters: keys holding characters that mean something
// in a URL ('?', '#', '%', ' ', '+') reach the server as exactly that key,
// under the store's prefix, and read back.
func TestKeysWithURLCharacters(t *testing.T) {
	srv := server.New(server.Config{}, "bucket")
	ts := httptest.NewServer(srv)
	defer ts.Close()
	d := open(t, ts.URL+"/bucket/pre")
	ctx := context.Background()
	keys := []string{"q?x=1", "h#frag", "p%41", "sp ace/a+b", "é/ü"}
	for _, k := range keys {
		if _, err := d.Put(ctx, k, strings.NewReader(k), storage.PutOptions{}); err != nil {
			t.Fatalf("put %q: %v", k, err)
		}
		if b, ok := srv.Bytes("bucket", "pre/"+k); !ok || string(b) != k {
			t.Fatalf("put %q: the server holds %q (found %v) under %q", k, b, ok, "pre/"+k)
		}
		r, err := d.Get(ctx, k)
		if err != nil {
			t.Fatalf("get %q: %v", k, err)
		}
		b, _ := io.ReadAll(r)
		r.Close()
		if string(b) != k {
			t.Fatalf("get %q: %q", k, b)
		}
	}
	page, err := d.List(ctx, storage.ListOptions{})
	if err != nil || len(page.Objects) != len(keys) {
		t.Fatalf("list: %+v, %v", page, err)
	}
}
