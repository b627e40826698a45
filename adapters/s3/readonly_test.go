package s3

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// A read-only open sends no write to the endpoint (no probe object under
// .retain-probe/), declares read-only, and refuses every write in the
// driver itself.
func TestOpenReadOnlyWritesNothing(t *testing.T) {
	var mu sync.Mutex
	var writes []string
	counting := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				mu.Lock()
				writes = append(writes, r.Method+" "+r.URL.String())
				mu.Unlock()
			}
			next.ServeHTTP(w, r)
		})
	}
	e, _ := wrappedGoFakeS3(t, nil, counting)
	raw := useEmulator(t, e, "robkt")
	if _, err := raw.PutObject(bg, &awss3.PutObjectInput{Bucket: aws.String("robkt"), Key: aws.String("p/ds.lance/_versions/1.manifest"),
		Body: strings.NewReader("m1")}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	writes = nil
	mu.Unlock()

	loc, err := storage.ParseLocation("s3://robkt/p")
	if err != nil {
		t.Fatal(err)
	}
	loc.ReadOnly = true
	d, err := Open(bg, loc)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	c := d.caps
	if !c.ReadOnly || len(c.Gates) != 0 {
		t.Errorf("caps: read-only %v, gates %v", c.ReadOnly, c.Gates)
	}
	for f, cp := range map[string]storage.Capability{"create": c.CreateIfAbsent, "replace": c.ReplaceIfVersion, "delete": c.DeleteIfVersion} {
		if cp.Level != storage.LevelNone || cp.Reason != "opened read-only" {
			t.Errorf("%s: %+v, want none (opened read-only)", f, cp)
		}
	}

	wantBody(t, d, "ds.lance/_versions/1.manifest", "m1")
	page, err := d.List(bg, storage.ListOptions{})
	if err != nil || len(page.Objects) != 1 {
		t.Errorf("list: %v, %v", page.Objects, err)
	}

	ro := func(what string, err error) {
		t.Helper()
		storagetest.WantKind(t, what, err, storage.ErrPermissionDenied)
		if !strings.Contains(err.Error(), "store opened read-only") {
			t.Errorf("%s: %v", what, err)
		}
	}
	_, err = putS(d, "k", "x", storage.PutOverwrite, "")
	ro("put", err)
	_, err = putS(d, "k", "x", storage.PutCreateIfAbsent, "")
	ro("put create", err)
	ro("delete", d.Delete(bg, "ds.lance/_versions/1.manifest", storage.DeleteOptions{}))
	_, err = d.DeleteMany(bg, []string{"ds.lance/_versions/1.manifest"})
	ro("delete-many", err)
	_, err = d.AcquireGate(bg, "metadata")
	ro("acquire-gate", err)

	mu.Lock()
	defer mu.Unlock()
	if len(writes) != 0 {
		t.Errorf("a read-only open sent writes: %q", writes)
	}
	out, err := raw.ListObjectsV2(bg, &awss3.ListObjectsV2Input{Bucket: aws.String("robkt")})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Contents) != 1 || aws.ToString(out.Contents[0].Key) != "p/ds.lance/_versions/1.manifest" {
		var keys []string
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		t.Errorf("bucket now holds %q", keys)
	}

	// Control: a writable open does probe (so the counter sees writes).
	writes = nil
	mu.Unlock()
	openT(t, "s3://robkt/p")
	mu.Lock()
	if len(writes) == 0 {
		t.Error("control: a writable open sent no writes; the counter is broken")
	}
}
