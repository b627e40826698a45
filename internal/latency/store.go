package latency

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/retain-dev/retain/adapters/s3"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/internal/emulator"
)

// S3 is one store on versitygw twice: Slow through a Proxy that adds the
// delay to every request (what is measured), Fast straight to the emulator
// (for setting up fixtures without paying the delay).
type S3 struct {
	Slow, Fast *storage.Store
	Proxy      *Proxy
	Emulator   *emulator.S3
}

// NewS3 starts versitygw with a bucket and opens the store s3://bucket/store
// both ways, in process (the plugin boundary is measured elsewhere).
func NewS3(tb testing.TB, delay time.Duration) *S3 {
	tb.Helper()
	e := emulator.VersitygwIn(tb, emulatorDir(tb))
	e.CreateBucket(tb, Bucket)
	emulator.IsolateAWS(tb, e.Env())
	p := NewProxy(tb, e.Endpoint, delay)
	return &S3{Slow: OpenS3(tb, p.URL, "store"), Fast: OpenS3(tb, e.Endpoint, "store"), Proxy: p, Emulator: e}
}

// Bucket is the harness's bucket.
const Bucket = "latency"

// OpenS3 opens s3://latency/<prefix> at endpoint, in process, with the
// adapter's default parallelism (RETAIN_PARALLELISM overrides it, as the
// CLI's --parallelism does).
func OpenS3(tb testing.TB, endpoint, prefix string) *storage.Store {
	tb.Helper()
	loc := storage.Location{Scheme: "s3", Bucket: Bucket, Prefix: prefix, Options: map[string]string{"endpoint": endpoint}}
	d, err := s3.Open(context.Background(), loc)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := storage.NewStore(context.Background(), "s3", d)
	if err != nil {
		tb.Fatal(err)
	}
	if v := os.Getenv("RETAIN_PARALLELISM"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			tb.Fatalf("RETAIN_PARALLELISM=%q: want a positive number", v)
		}
		s = s.WithParallelism(n)
	}
	tb.Cleanup(func() { s.Close() })
	return s.At(loc)
}

// UploadCopies uploads n copies of the table src as t0000.lance,
// t0001.lance, …, 16 at a time.
func UploadCopies(s *storage.Store, src string, n int) error {
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errs <- Upload(s, src, fmt.Sprintf("t%04d.lance", i))
		}()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Upload copies the Lance table in folder src (a fixture on disk) to the
// store under dst.
func Upload(s *storage.Store, src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		_, err = s.PutBytes(context.Background(), dst+"/"+filepath.ToSlash(rel), b, storage.PutOptions{})
		return err
	})
}
