package daemon

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
)

func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// /healthz answers while the process serves; /readyz only after a pass
// succeeded, with the reason otherwise; /metrics carries the standard
// go_* and process_* metrics and the last pass's outcome.
func TestHealthReadyAndMetrics(t *testing.T) {
	_, s, loc := store(t, "deletes")
	d := &Daemon{Store: s.At(loc), Config: cfg(t, "retention:\n  keep_last: 1\n  writers_stopped: true\n")}
	srv := httptest.NewServer(d.Handler())
	defer srv.Close()
	if code, _ := get(t, srv, "/healthz"); code != 200 {
		t.Fatalf("/healthz before any pass: %d", code)
	}
	if code, body := get(t, srv, "/readyz"); code != 503 || !strings.Contains(body, "no maintenance pass") {
		t.Fatalf("/readyz before any pass: %d %q", code, body)
	}

	// Another process holds the claim: the pass's retention waits for it,
	// which is no reason to be taken out of service.
	h, err := claim.Acquire(bg, s.At(loc), claim.Request{Action: "cleanup", Actor: "someone-else"})
	if err != nil {
		t.Fatal(err)
	}
	if r := d.Pass(bg); r.Err() == nil {
		t.Fatalf("a pass with the claim held elsewhere succeeded: %+v", r)
	}
	if code, body := get(t, srv, "/readyz"); code != 200 || !strings.Contains(body, "waited for the retention claim") {
		t.Fatalf("/readyz after a pass that waited for the claim: %d %q", code, body)
	}
	if err := h.Release(bg); err != nil {
		t.Fatal(err)
	}

	if r := d.Pass(bg); r.Err() != nil {
		t.Fatalf("pass: %v", r.Err())
	}
	if code, body := get(t, srv, "/readyz"); code != 200 || !strings.HasPrefix(body, "ready") {
		t.Fatalf("/readyz after a pass: %d %q", code, body)
	}
	_, body := get(t, srv, "/metrics")
	for _, want := range []string{"\ngo_goroutines ", "\nprocess_resident_memory_bytes ", "\nretain_last_pass_success 1\n", "\nretain_last_pass_timestamp_seconds ", "\nretain_passes_total 2\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no %q", strings.TrimSpace(want))
		}
	}
}

// A pass that fails for another reason than a held claim (here a store
// opened read-only: nothing can be cleaned or recorded) makes /readyz
// answer 503 with the reason, and retain_last_pass_success 0.
func TestReadyzAfterAFailedPass(t *testing.T) {
	dir, _, loc := store(t, "deletes")
	ro, err := localfs.OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(bg, "localfs", ro)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	d := &Daemon{Store: s.At(loc), Config: cfg(t, "retention:\n  keep_last: 1\n  writers_stopped: true\n")}
	srv := httptest.NewServer(d.Handler())
	defer srv.Close()
	if r := d.Pass(bg); r.Err() == nil || r.ClaimHolder != "" {
		t.Fatalf("a pass on a read-only store: %+v", r)
	}
	if code, body := get(t, srv, "/readyz"); code != 503 || !strings.Contains(body, "failed") {
		t.Fatalf("/readyz after a failed pass: %d %q", code, body)
	}
	if _, body := get(t, srv, "/metrics"); !strings.Contains(body, "\nretain_last_pass_success 0\n") {
		t.Fatalf("/metrics after a failed pass has no retain_last_pass_success 0")
	}
}
