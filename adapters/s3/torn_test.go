package s3

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// etagSwapper answers GETs of keys containing "torn" with the ETag of
// another body, as versitygw 1.8.0 was seen to under concurrent writes.
type etagSwapper struct{ h http.Handler }

func (s etagSwapper) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/torn/") {
		s.h.ServeHTTP(&swapWriter{ResponseWriter: w}, r)
		return
	}
	s.h.ServeHTTP(w, r)
}

type swapWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *swapWriter) WriteHeader(code int) {
	if !w.wrote && w.Header().Get("ETag") != "" {
		w.Header().Set("ETag", `"`+strings.Repeat("ab", 16)+`"`)
	}
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *swapWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// A body that does not hash to its ETag is refused (transient), never
// returned under that token; an honest body passes the same check.
func TestTornReadRefused(t *testing.T) {
	e, _ := wrappedGoFakeS3(t, nil, func(h http.Handler) http.Handler { return etagSwapper{h} })
	useEmulator(t, e, "tr-bucket")
	d := openT(t, "s3://tr-bucket/p")
	if !d.verifyMD5 {
		t.Fatal("the probe should have found ETags to be MD5s on gofakes3")
	}
	storagetest.MustPut(t, d, "torn/k", "hello")
	r, err := d.Get(bg, "torn/k")
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(r)
	r.Close()
	if !errors.Is(err, storage.ErrTransient) || !strings.Contains(err.Error(), "torn read") {
		t.Fatalf("a body under another version's ETag: want a transient torn-read error, got %v", err)
	}
	storagetest.MustPut(t, d, "fine/k", "hello")
	wantBody(t, d, "fine/k", "hello")
}
