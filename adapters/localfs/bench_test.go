//go:build linux

package localfs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/retain-dev/retain/core"
	"github.com/retain-dev/retain/pluginproto"
)

// Benchmarks of localfs in process against localfs through the plugin
// boundary (this test binary re-executed as `__adapter-plugin localfs`, as
// the retain binary serves its bundled adapters). Every benchmark has an
// /inprocess and a /plugin sub-benchmark doing the same calls on a
// core.Driver wrapped in core.Counting, so each reports req/op too. The raw
// unix-socket round trip is here as well, so the boundary's cost and its
// floor come from the same `go test -bench` run. docs/performance.md has
// the commands and the figures.

// envEcho makes the test binary a 1 KiB unix-socket echo server listening
// at the path it names (see TestMain).
const envEcho = "RETAIN_LOCALFS_BENCH_ECHO"

// benchDrivers are the two ways of reaching a localfs store.
var benchDrivers = []struct {
	name string
	open func(b *testing.B, root string) core.Driver
}{
	{"inprocess", openInProcess},
	{"plugin", openPlugin},
}

func openInProcess(b *testing.B, root string) core.Driver {
	b.Helper()
	d, err := Adapter.Open(context.Background(), core.Location{Scheme: "file", Path: root})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}

func openPlugin(b *testing.B, root string) core.Driver {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pluginproto.Launch(ctx, pluginproto.LaunchConfig{
		Adapter:  "localfs",
		Path:     exe,
		Args:     []string{pluginproto.BundledSubcommand, "localfs"},
		Location: core.Location{Scheme: "file", Path: root},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// reportReqs reports the requests per iteration that reached the driver.
func reportReqs(b *testing.B, c *core.Counting) {
	b.ReportMetric(float64(c.Counts().Total())/float64(b.N), "req/op")
}

// BenchmarkPutCreateDelete is a create-if-absent Put of 1 KiB and an
// unconditional Delete per op: localfs fsyncs the temp file and the
// directory for the create and the directory again for the delete.
func BenchmarkPutCreateDelete(b *testing.B) {
	for _, bd := range benchDrivers {
		b.Run(bd.name, func(b *testing.B) {
			c := core.NewCounting(bd.open(b, b.TempDir()))
			ctx := context.Background()
			body := bytes.Repeat([]byte("x"), 1024)
			for b.Loop() {
				if _, err := c.Put(ctx, "bench/cas", bytes.NewReader(body), core.PutOptions{Mode: core.PutCreateIfAbsent}); err != nil {
					b.Fatal(err)
				}
				if err := c.Delete(ctx, "bench/cas", core.DeleteOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			reportReqs(b, c)
		})
	}
}

// BenchmarkGet1KiB opens a 1 KiB object and reads it to the end.
func BenchmarkGet1KiB(b *testing.B) {
	for _, bd := range benchDrivers {
		b.Run(bd.name, func(b *testing.B) {
			d := bd.open(b, b.TempDir())
			ctx := context.Background()
			if _, err := d.Put(ctx, "bench/get", bytes.NewReader(bytes.Repeat([]byte("x"), 1024)), core.PutOptions{}); err != nil {
				b.Fatal(err)
			}
			c := core.NewCounting(d)
			buf := make([]byte, 2048)
			b.SetBytes(1024)
			for b.Loop() {
				r, err := c.Get(ctx, "bench/get")
				if err != nil {
					b.Fatal(err)
				}
				// A short ReadFull reads on to the end of the body.
				if n, err := io.ReadFull(r, buf); err != io.ErrUnexpectedEOF || n != 1024 {
					b.Fatalf("read %d bytes: %v", n, err)
				}
				r.Close()
			}
			reportReqs(b, c)
		})
	}
}

// BenchmarkStat stats a 1 KiB object: a unary call through the plugin,
// where Get is a server stream, so the two show what the stream costs.
func BenchmarkStat(b *testing.B) {
	for _, bd := range benchDrivers {
		b.Run(bd.name, func(b *testing.B) {
			d := bd.open(b, b.TempDir())
			ctx := context.Background()
			if _, err := d.Put(ctx, "bench/stat", bytes.NewReader(bytes.Repeat([]byte("x"), 1024)), core.PutOptions{}); err != nil {
				b.Fatal(err)
			}
			c := core.NewCounting(d)
			for b.Loop() {
				if info, err := c.Stat(ctx, "bench/stat"); err != nil || info.Size != 1024 {
					b.Fatalf("stat: %+v, %v", info, err)
				}
			}
			reportReqs(b, c)
		})
	}
}

// BenchmarkList1000 lists one page of 1,000 keys. Both sub-benchmarks list
// the same directory tree, filled once.
func BenchmarkList1000(b *testing.B) {
	root := b.TempDir()
	ctx := context.Background()
	d, err := Open(root)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		if _, err := d.Put(ctx, fmt.Sprintf("bench/list/%04d", i), bytes.NewReader([]byte("x")), core.PutOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	d.Close()
	for _, bd := range benchDrivers {
		b.Run(bd.name, func(b *testing.B) {
			c := core.NewCounting(bd.open(b, root))
			for b.Loop() {
				page, err := c.List(ctx, core.ListOptions{Prefix: "bench/list/", PageSize: 1000})
				if err != nil {
					b.Fatal(err)
				}
				if len(page.Objects) != 1000 {
					b.Fatalf("listed %d objects", len(page.Objects))
				}
			}
			reportReqs(b, c)
		})
	}
}

// BenchmarkRawUnixSocketRoundTrip is the floor under the boundary: a 1 KiB
// write and a 1 KiB echo back over a unix socket, with no gRPC, TLS or
// protobuf. /goroutines echoes from another goroutine of this process (as
// pluginproto's BenchmarkRawUnixSocketRoundTrip does); /processes echoes
// from another process, as the plugin does.
func BenchmarkRawUnixSocketRoundTrip(b *testing.B) {
	b.Run("goroutines", func(b *testing.B) {
		sock := filepath.Join(b.TempDir(), "echo.sock")
		ln, err := net.Listen("unix", sock)
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		go func() {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			echo(conn)
		}()
		benchRoundTrip(b, sock)
	})
	b.Run("processes", func(b *testing.B) {
		sock := filepath.Join(b.TempDir(), "echo.sock")
		exe, err := os.Executable()
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), envEcho+"="+sock)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() {
			cmd.Process.Kill()
			cmd.Wait()
		}()
		if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
			b.Fatalf("echo process said %q: %v", line, err)
		}
		benchRoundTrip(b, sock)
	})
}

func benchRoundTrip(b *testing.B, sock string) {
	conn, err := net.Dial("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	msg, got := bytes.Repeat([]byte("x"), 1024), make([]byte, 1024)
	b.SetBytes(1024)
	for b.Loop() {
		if _, err := conn.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(conn, got); err != nil {
			b.Fatal(err)
		}
	}
}

// echo sends back every 1 KiB read from conn until it ends.
func echo(conn net.Conn) {
	defer conn.Close()
	buf := make([]byte, 1024)
	for {
		if _, err := io.ReadFull(conn, buf); err != nil {
			return
		}
		if _, err := conn.Write(buf); err != nil {
			return
		}
	}
}

// runEcho is the echo process: it listens at sock, says "ready" on stdout,
// and echoes one connection until it ends.
func runEcho(sock string) int {
	ln, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, "echo:", err)
		return 2
	}
	defer ln.Close()
	fmt.Println("ready")
	conn, err := ln.Accept()
	if err != nil {
		fmt.Fprintln(os.Stderr, "echo:", err)
		return 2
	}
	echo(conn)
	return 0
}
