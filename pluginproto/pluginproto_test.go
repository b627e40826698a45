package pluginproto

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/pluginproto/internal/pb"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func wantKind(t *testing.T, err error, kind storage.Kind) *storage.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", kind)
	}
	var ce *storage.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is no *core.Error", err, err)
	}
	if !errors.Is(err, kind) || ce.Kind != kind {
		t.Fatalf("error %q has kind %s, want %s", err, ce.Kind, kind)
	}
	return ce
}

func TestRoundTrip(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	c := launch(t, "mem")

	caps, err := c.Capabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := newTestDriver().Capabilities(ctx)
	if !reflect.DeepEqual(caps, want) {
		t.Fatalf("capabilities:\n got %+v\nwant %+v", caps, want)
	}

	info, err := c.Put(ctx, "a/b", strings.NewReader("hello"), storage.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Key != "a/b" || info.Size != 5 || info.Version == "" || info.ModTime.IsZero() {
		t.Fatalf("put info %+v", info)
	}
	st, err := c.Stat(ctx, "a/b")
	if err != nil {
		t.Fatal(err)
	}
	if st.Key != info.Key || st.Size != info.Size || st.Version != info.Version || !st.ModTime.Equal(info.ModTime) {
		t.Fatalf("stat %+v, put said %+v", st, info)
	}
	r, err := c.Get(ctx, "a/b")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(r)
	r.Close()
	if err != nil || string(body) != "hello" || r.Info.Version != info.Version {
		t.Fatalf("get: %q, %+v, %v", body, r.Info, err)
	}

	// An empty body.
	if _, err := c.Put(ctx, "empty", bytes.NewReader(nil), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err = c.Get(ctx, "empty")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(r); err != nil || len(b) != 0 || r.Info.Size != 0 {
		t.Fatalf("empty: %q %v", b, err)
	}

	// Conditional modes and their error kinds.
	_, err = c.Put(ctx, "a/b", strings.NewReader("x"), storage.PutOptions{Mode: storage.PutCreateIfAbsent})
	wantKind(t, err, storage.ErrAlreadyExists)
	_, err = c.Put(ctx, "a/b", strings.NewReader("x"), storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: "nope"})
	wantKind(t, err, storage.ErrPreconditionFailed)
	info2, err := c.Put(ctx, "a/b", strings.NewReader("x"), storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: info.Version})
	if err != nil || info2.Version == info.Version {
		t.Fatalf("replace: %+v %v", info2, err)
	}
	wantKind(t, c.Delete(ctx, "a/b", storage.DeleteOptions{IfVersion: info.Version}), storage.ErrPreconditionFailed)
	if err := c.Delete(ctx, "a/b", storage.DeleteOptions{IfVersion: info2.Version}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Stat(ctx, "a/b")
	wantKind(t, err, storage.ErrNotFound)
	_, err = c.Get(ctx, "a/b")
	wantKind(t, err, storage.ErrNotFound)

	// List and DeleteMany, through the portable Store as retain uses it.
	s, err := storage.NewStore(ctx, "testmem", c)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i := range 25 {
		k := fmt.Sprintf("l/%02d", i)
		keys = append(keys, k)
		if _, err := s.PutBytes(ctx, k, []byte(k), storage.PutOptions{Mode: storage.PutCreateIfAbsent}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := c.List(ctx, storage.ListOptions{Prefix: "l/", PageSize: 10})
	if err != nil || len(page.Objects) != 10 || !page.More || page.Objects[0].Key != "l/00" {
		t.Fatalf("list page: %d objects, more %v, %v", len(page.Objects), page.More, err)
	}
	all, err := s.List(ctx, "l/", 0)
	if err != nil || len(all) != 25 {
		t.Fatalf("list: %d, %v", len(all), err)
	}
	res, err := s.DeleteMany(ctx, append(keys, "err/1", "bad//key"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res[:25] {
		if r.Err != nil {
			t.Fatalf("delete %s: %v", r.Key, r.Err)
		}
	}
	wantKind(t, res[25].Err, storage.ErrNotFound)
	wantKind(t, res[26].Err, storage.ErrInvalidArgument)
	if all, _ := s.List(ctx, "", 0); len(all) != 1 || all[0].Key != "empty" {
		t.Fatalf("after delete-many: %+v", all)
	}
	if b, _, err := s.ReadAll(ctx, "empty"); err != nil || len(b) != 0 {
		t.Fatalf("store read: %q %v", b, err)
	}
}

func TestGates(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	c := launch(t, "mem")
	l, err := c.AcquireGate(ctx, testGate)
	if err != nil || l.Name != testGate || l.Token == "" {
		t.Fatalf("acquire: %+v %v", l, err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = c.AcquireGate(short, testGate)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second acquire: %v", err)
	}
	wantKind(t, c.ReleaseGate(ctx, storage.GateLease{Name: testGate, Token: "wrong"}), storage.ErrInvalidArgument)
	if err := c.ReleaseGate(ctx, l); err != nil {
		t.Fatal(err)
	}
	_, err = c.AcquireGate(ctx, "other")
	wantKind(t, err, storage.ErrUnsupported)
	l2, err := c.AcquireGate(ctx, testGate)
	if err != nil || l2.Token == l.Token {
		t.Fatalf("reacquire: %+v %v", l2, err)
	}
}

func TestErrorKindsCross(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	c := launch(t, "mem")
	for k := storage.Kind(0); k.Valid(); k++ {
		key := fmt.Sprintf("err/%d", k)
		_, err := c.Stat(ctx, key)
		ce := wantKind(t, err, k)
		if ce.Op != "stat" || ce.Key != key || ce.Msg != fmt.Sprintf("injected kind %d", k) {
			t.Fatalf("kind %s crossed as %#v", k, ce)
		}
	}
	// A kind the host does not know is unknown.
	_, err := c.Stat(ctx, "err/200")
	wantKind(t, err, storage.ErrUnknown)
	// Every operation carries errors.
	_, err = c.Get(ctx, "err/1")
	wantKind(t, err, storage.ErrNotFound)
	_, err = c.Put(ctx, "err/6", strings.NewReader("x"), storage.PutOptions{})
	wantKind(t, err, storage.ErrPermissionDenied)
	wantKind(t, c.Delete(ctx, "err/8", storage.DeleteOptions{}), storage.ErrLimitExceeded)
	res, err := c.DeleteMany(ctx, []string{"err/7", "x"})
	if err != nil || len(res) != 2 || res[1].Err != nil {
		t.Fatalf("delete-many: %+v %v", res, err)
	}
	wantKind(t, res[0].Err, storage.ErrTransient)
	// The adapter's Open error is typed too.
	_, err = Launch(ctx, func() LaunchConfig {
		cfg := testConfig("mem")
		cfg.Location.Options = map[string]string{"fail": "no such bucket"}
		return cfg
	}())
	ce := wantKind(t, err, storage.ErrInvalidArgument)
	if ce.Op != "open" || !strings.Contains(ce.Msg, "no such bucket") {
		t.Fatalf("open error %#v", ce)
	}
}

// panicRPC fails the test by panicking if any RPC is made.
type panicRPC struct{ pb.StorageClient }

func TestInvalidKeyRefusedByHost(t *testing.T) {
	ctx := ctxT(t, 10*time.Second)
	c := &Client{adapter: "none", rpc: panicRPC{}}
	bad := "a/../b"
	_, err := c.Stat(ctx, bad)
	wantKind(t, err, storage.ErrInvalidArgument)
	_, err = c.Get(ctx, bad)
	wantKind(t, err, storage.ErrInvalidArgument)
	_, err = c.Put(ctx, "/abs", strings.NewReader("x"), storage.PutOptions{})
	wantKind(t, err, storage.ErrInvalidArgument)
	wantKind(t, c.Delete(ctx, "a\\b", storage.DeleteOptions{}), storage.ErrInvalidArgument)
	_, err = c.List(ctx, storage.ListOptions{Prefix: "a//"})
	wantKind(t, err, storage.ErrInvalidArgument)
	_, err = c.List(ctx, storage.ListOptions{StartAfter: "\xff"})
	wantKind(t, err, storage.ErrInvalidArgument)
	res, err := c.DeleteMany(ctx, []string{"", "x/./y"})
	if err != nil || len(res) != 2 {
		t.Fatalf("delete-many: %v %v", res, err)
	}
	wantKind(t, res[0].Err, storage.ErrInvalidArgument)
	wantKind(t, res[1].Err, storage.ErrInvalidArgument)
}

func TestInvalidKeyRefusedByPlugin(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	c := launch(t, "mem")
	// The test driver does not validate keys: only the plugin half can
	// refuse them. Talk to it directly, past the host's validation.
	const bad = "a//b"
	check := func(op string, err error) {
		t.Helper()
		ce := wantKind(t, c.convertErr(ctx, op, bad, err), storage.ErrInvalidArgument)
		if !strings.Contains(ce.Msg, "invalid") || ce.Op != op {
			t.Fatalf("%s: %#v", op, ce)
		}
	}
	_, err := c.rpc.Stat(ctx, &pb.StatRequest{Key: bad})
	check("stat", err)
	_, err = c.rpc.Delete(ctx, &pb.DeleteRequest{Key: "../x"})
	check("delete", err)
	gs, err := c.rpc.Get(ctx, &pb.GetRequest{Key: bad})
	if err == nil {
		_, err = gs.Recv()
	}
	check("get", err)
	ps, err := c.rpc.Put(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ps.Send(&pb.PutRequest{Header: &pb.PutHeader{Key: bad}, Data: []byte("x")}); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	_, err = ps.CloseAndRecv()
	check("put", err)
	_, err = c.rpc.List(ctx, &pb.ListRequest{Prefix: "/x"})
	check("list", err)
	resp, err := c.rpc.DeleteMany(ctx, &pb.DeleteManyRequest{Keys: []string{"ok", bad, "err/1"}})
	if err != nil || len(resp.Results) != 3 {
		t.Fatalf("delete-many: %v %v", resp, err)
	}
	if resp.Results[0].Error != nil || resp.Results[1].Error == nil || resp.Results[2].Error == nil {
		t.Fatalf("delete-many results %v", resp.Results)
	}
	wantKind(t, fromDetail(resp.Results[1].Error, 0), storage.ErrInvalidArgument)
	wantKind(t, fromDetail(resp.Results[2].Error, 0), storage.ErrNotFound)
	_, err = c.Stat(ctx, "a/b") // the plugin still works
	wantKind(t, err, storage.ErrNotFound)
}

func TestLargeBody(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	c := launch(t, "mem")
	data := make([]byte, 9<<20+123)
	rand.Read(data)
	for _, tc := range []struct {
		name string
		body io.Reader
	}{
		{"sized", bytes.NewReader(data)},
		{"unsized", io.MultiReader(bytes.NewReader(data[:5<<20+7]), bytes.NewReader(data[5<<20+7:]))},
	} {
		info, err := c.Put(ctx, "big/"+tc.name, tc.body, storage.PutOptions{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if info.Size != int64(len(data)) {
			t.Fatalf("%s: size %d", tc.name, info.Size)
		}
		r, err := c.Get(ctx, "big/"+tc.name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: read %d bytes, equal %v, %v", tc.name, len(got), bytes.Equal(got, data), err)
		}
	}
	// Bodies stream in chunks no larger than chunkSize, under gRPC's
	// default 4 MiB message limit whatever the object's size.
	gs, err := c.rpc.Get(ctx, &pb.GetRequest{Key: "big/sized"})
	if err != nil {
		t.Fatal(err)
	}
	msgs := 0
	for {
		m, err := gs.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Data) > chunkSize {
			t.Fatalf("message of %d bytes", len(m.Data))
		}
		msgs++
	}
	if msgs < 10 {
		t.Fatalf("%d messages for %d bytes", msgs, len(data))
	}
	// Closing a reader mid-body ends its stream and nothing else.
	r, err := c.Get(ctx, "big/sized")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	if _, err := io.ReadFull(r, buf); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if _, err := r.Read(buf); err == nil {
		t.Fatal("read after close succeeded")
	}
	if _, err := c.Stat(ctx, "big/sized"); err != nil {
		t.Fatal(err)
	}
}

type errAfter struct{ err error }

func (e errAfter) Read([]byte) (int, error) { return 0, e.err }

// lyingLen claims a length its reader does not have.
type lyingLen struct {
	io.Reader
	n int
}

func (l lyingLen) Len() int { return l.n }

func TestPutBodyFailureWritesNothing(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	c := launch(t, "mem")
	// io.ErrUnexpectedEOF from the body is a truncated source, not the end.
	body := io.MultiReader(bytes.NewReader(make([]byte, 3<<19)), errAfter{io.ErrUnexpectedEOF})
	_, err := c.Put(ctx, "trunc", body, storage.PutOptions{})
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("put of a failing body: %v", err)
	}
	// A declared size the body does not meet is refused by the plugin.
	_, err = c.Put(ctx, "lie", lyingLen{strings.NewReader("12345"), 10}, storage.PutOptions{})
	wantKind(t, err, storage.ErrInvalidArgument)
	_, err = c.Put(ctx, "lie", lyingLen{strings.NewReader("12345"), 2}, storage.PutOptions{})
	wantKind(t, err, storage.ErrInvalidArgument)
	for _, k := range []string{"trunc", "lie"} {
		_, err = c.Stat(ctx, k)
		wantKind(t, err, storage.ErrNotFound)
	}
	// A body that ends short of its info is an error, never a short read.
	r, err := c.Get(ctx, "shortbody/x")
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(r)
	wantKind(t, err, storage.ErrTransient)
}

// waitUnblocked waits until the plugin's driver has seen n blocked calls end.
func waitUnblocked(t *testing.T, c *Client, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := c.Stat(context.Background(), "probe/unblocked")
		if err != nil {
			t.Fatal(err)
		}
		if info.Size >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the driver saw %d cancelled calls end, want %d: the plugin did not pass the call's context", info.Size, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestContextCrosses: the caller's deadline and cancellation end the call
// at once and reach the driver, over the session (mem) and as unary calls
// (legacy, a plugin that predates the session).
func TestContextCrosses(t *testing.T) {
	for _, mode := range []string{"mem", "legacy"} {
		t.Run(mode, func(t *testing.T) { testContextCrosses(t, mode) })
	}
}

func testContextCrosses(t *testing.T, mode string) {
	c := launch(t, mode)
	ops := map[string]func(ctx context.Context) error{
		"stat": func(ctx context.Context) error { _, err := c.Stat(ctx, "block/x"); return err },
		"get":  func(ctx context.Context) error { _, err := c.Get(ctx, "block/x"); return err },
		"put": func(ctx context.Context) error {
			_, err := c.Put(ctx, "block/x", strings.NewReader("x"), storage.PutOptions{})
			return err
		},
		"delete": func(ctx context.Context) error { return c.Delete(ctx, "block/x", storage.DeleteOptions{}) },
		"gate": func(ctx context.Context) error {
			_, err := c.AcquireGate(ctx, testGate)
			return err
		},
		"body": func(ctx context.Context) error {
			r, err := c.Get(ctx, "slowbody/x")
			if err != nil {
				return err
			}
			_, err = io.ReadAll(r)
			return err
		},
	}
	// Hold the gate, so acquiring it blocks.
	if _, err := c.AcquireGate(context.Background(), testGate); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, name := range []string{"stat", "get", "put", "delete", "gate", "body"} {
		op := ops[name]
		t.Run("deadline/"+name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := op(ctx)
			if el := time.Since(start); el > 2*time.Second {
				t.Fatalf("took %v", el)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("got %v, want deadline exceeded", err)
			}
			wantKind(t, err, storage.ErrTransient)
			n++
			waitUnblocked(t, c, n)
		})
		t.Run("cancel/"+name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(150*time.Millisecond, cancel)
			start := time.Now()
			err := op(ctx)
			if el := time.Since(start); el > 2*time.Second {
				t.Fatalf("took %v", el)
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v, want canceled", err)
			}
			n++
			waitUnblocked(t, c, n)
		})
	}
}

func TestPutReturnsWhileBodyBlocks(t *testing.T) {
	c := launch(t, "mem")
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write(make([]byte, 100))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Put(ctx, "k", pr, storage.PutOptions{})
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("took %v", el)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
	pw.CloseWithError(errors.New("done"))
	// Nothing was written.
	_, err = c.Stat(context.Background(), "k")
	wantKind(t, err, storage.ErrNotFound)
}

func sha256File(t *testing.T, path string) string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestChecksum(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	actual := sha256File(t, testExe())
	wrong := sha256.Sum256([]byte("some other binary"))
	cfg := testConfig("mem")
	cfg.SHA256 = hex.EncodeToString(wrong[:])
	_, err := Launch(ctx, cfg)
	ce := wantKind(t, err, storage.ErrPermissionDenied)
	for _, s := range []string{cfg.SHA256, actual, cfg.Path} {
		if !strings.Contains(ce.Msg, s) {
			t.Errorf("message %q lacks %q", ce.Msg, s)
		}
	}
	cfg.SHA256 = "xyz"
	_, err = Launch(ctx, cfg)
	wantKind(t, err, storage.ErrInvalidArgument)

	c := launch(t, "mem", func(cfg *LaunchConfig) { cfg.SHA256 = strings.ToUpper(actual) })
	_, err = c.Stat(ctx, "a")
	wantKind(t, err, storage.ErrNotFound)
}

func TestVersionNegotiation(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	_, err := Launch(ctx, testConfig("v2"))
	ce := wantKind(t, err, storage.ErrUnsupported)
	for _, s := range []string{"version 2", "version 1", "testmem"} {
		if !strings.Contains(ce.Msg, s) {
			t.Errorf("message %q lacks %q", ce.Msg, s)
		}
	}
	t.Log(err)
}

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestHandshakeAndLogs(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	// A plugin that logs to stderr at start works, and its logs reach the
	// host's logger.
	var logs syncBuffer
	c := launch(t, "chatty", func(cfg *LaunchConfig) {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})
	})
	if _, err := c.Stat(ctx, "a"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "chatty plugin starting") {
		t.Errorf("the plugin's logs did not reach the host:\n%s", logs.String())
	}
	// One that writes to stdout before the handshake is refused.
	_, err := Launch(ctx, testConfig("stdout"))
	if ce := wantKind(t, err, storage.ErrUnavailable); !strings.Contains(ce.Msg, "stdout") {
		t.Errorf("message %q does not blame stdout", ce.Msg)
	}
	t.Log(err)
}

func TestLaunchErrors(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	cfg := testConfig("mem")
	cfg.Path = "/nonexistent/plugin"
	_, err := Launch(ctx, cfg)
	wantKind(t, err, storage.ErrInvalidArgument)
	cfg = testConfig("no-such-mode")
	_, err = Launch(ctx, cfg)
	wantKind(t, err, storage.ErrUnavailable)
	// A plugin run by hand, without the host's cookie, refuses to serve.
	byHand := exec.Command(testExe())
	byHand.Env = append(os.Environ(), envMode+"=mem")
	out, err := byHand.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "This binary is a plugin") {
		t.Fatalf("serving by hand: %v: %s", err, out)
	}
}

// A plugin that exits before its handshake is an ErrUnavailable carrying
// its exit status, which a host running its own binary as a plugin reads.
func TestLaunchReportsExitStatus(t *testing.T) {
	_, err := Launch(ctxT(t, 30*time.Second), testConfig("exit7"))
	wantKind(t, err, storage.ErrUnavailable)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 7 {
		t.Fatalf("%v: want an ExitError with status 7, got %#v", err, ee)
	}
}

func TestCloseMidCall(t *testing.T) {
	c := launch(t, "mem")
	errc := make(chan error, 1)
	go func() {
		_, err := c.Stat(context.Background(), "block/x")
		errc <- err
	}()
	time.Sleep(200 * time.Millisecond)
	c.Close()
	select {
	case err := <-errc:
		wantKind(t, err, storage.ErrUnavailable)
	case <-time.After(5 * time.Second):
		t.Fatal("a call in flight hung when the client was closed")
	}
}
