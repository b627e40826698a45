package retention

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// slowAuditStore is a memstore whose audit writes take a round trip, and
// that counts them; fail makes them fail.
func slowAuditStore(t *testing.T, fail *atomic.Bool) (*storage.Store, *atomic.Int64) {
	var puts atomic.Int64
	h := storagetest.NewHook(memstore.New()).Before(func(c storagetest.Call) error {
		if c.Op == storagetest.OpPut && strings.HasPrefix(c.Key, AuditPrefix) {
			puts.Add(1)
			time.Sleep(20 * time.Millisecond)
			if fail != nil && fail.Load() {
				return storage.Errorf("put", c.Key, storage.ErrUnavailable, "the test fails audit writes")
			}
		}
		return nil
	})
	s, err := storage.NewStore(bg, "memory", h)
	if err != nil {
		t.Fatal(err)
	}
	return s, &puts
}

// TestAuditLinesWrittenTogetherShareObjects: 64 tables writing their lines
// at once cost a few objects, not 64, every line is durable when its
// write returns, and ReadAudit reads every line back.
func TestAuditLinesWrittenTogetherShareObjects(t *testing.T) {
	s, puts := slowAuditStore(t, nil)
	au := &auditor{s: s, op: "cleanup-test", actor: "tester"}
	const n = 64
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = au.write(bg, AuditRecord{Event: AuditRemoving, Table: "t" + string(rune('A'+i%26)) + ".lance"})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
	}
	if got := puts.Load(); got > 8 {
		t.Errorf("%d lines written at once took %d objects, want a few", n, got)
	}
	lines, err := ReadAudit(bg, s, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != n {
		t.Fatalf("read %d lines back, wrote %d", len(lines), n)
	}
	for _, l := range lines {
		if l.OperationID != "cleanup-test" || l.Event != AuditRemoving || l.Format != 1 {
			t.Fatalf("line %+v", l)
		}
	}
	t.Logf("%d lines, %d objects", n, puts.Load())
}

// TestAuditBatchFailureFailsEveryLine: when an object fails to be written,
// every line in it is reported not written (a "removing" line that is not
// durable stops its table's deletions).
func TestAuditBatchFailureFailsEveryLine(t *testing.T) {
	var fail atomic.Bool
	fail.Store(true)
	s, _ := slowAuditStore(t, &fail)
	au := &auditor{s: s, op: "cleanup-test", actor: "tester"}
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = au.write(bg, AuditRecord{Event: AuditRemoving, Table: "t.lance"}) }()
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, storage.ErrUnavailable) {
			t.Fatalf("line %d of a failed object: %v, want the write's error", i, err)
		}
	}
	fail.Store(false)
	if err := au.write(bg, AuditRecord{Event: AuditRemoved, Table: "t.lance"}); err != nil {
		t.Fatalf("a write after the failure: %v", err)
	}
	if lines, err := ReadAudit(bg, s, time.Time{}); err != nil || len(lines) != 1 {
		t.Fatalf("%v: %d lines, want the one written", err, len(lines))
	}
}

// TestReadAuditObjects: an object of one line (as builds before batching
// wrote) and one of several are both read; a line that does not parse,
// or an object holding none, is an error naming the object.
func TestReadAuditObjects(t *testing.T) {
	s, err := storage.NewStore(bg, "memory", memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	put := func(key, body string) {
		t.Helper()
		if _, err := s.PutBytes(bg, AuditPrefix+key, []byte(body), storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	put("2026-12-01/00000000000000000001-op-0001.json",
		`{"format":1,"event":"removing","at":"2026-12-01T10:00:00Z","operation_id":"op","actor":"a","table":"t.lance","versions":[]}`+"\n")
	put("2026-12-01/00000000000000000002-op-0002.json",
		`{"format":1,"event":"removed","at":"2026-12-01T10:00:02Z","operation_id":"op","actor":"a","table":"t.lance","versions":[]}`+"\n"+
			`{"format":1,"event":"removed","at":"2026-12-01T10:00:01Z","operation_id":"op","actor":"a","table":"u.lance","versions":[]}`+"\n")
	lines, err := ReadAudit(bg, s, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 3 || lines[1].Table != "u.lance" || lines[2].Table != "t.lance" {
		t.Fatalf("lines %+v: want three, oldest first", lines)
	}
	put("2026-12-01/00000000000000000003-op-0003.json", `{"format":1}`+"\n"+"not json\n")
	if _, err := ReadAudit(bg, s, time.Time{}); err == nil || !strings.Contains(err.Error(), "0003.json") {
		t.Fatalf("a bad line: %v, want an error naming the object", err)
	}
	put("2026-12-01/00000000000000000003-op-0003.json", "\n")
	if _, err := ReadAudit(bg, s, time.Time{}); err == nil || !strings.Contains(err.Error(), "0003.json") {
		t.Fatalf("an empty object: %v, want an error naming it", err)
	}
}
