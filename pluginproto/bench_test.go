package pluginproto

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"testing"

	"github.com/retain-dev/retain/core"
)

// Benchmarks are written against core.Driver, so the same body measures a
// driver in process and the same driver through a plugin: add a mode to
// pluginModes that serves it, launch it with benchPlugin (editing the
// location), and call the bench* helper with each.

// benchPlugin launches this test binary as a plugin in mode.
func benchPlugin(b *testing.B, mode string, edit ...func(*LaunchConfig)) core.Driver {
	b.Helper()
	return launch(b, mode, edit...)
}

// BenchmarkRawUnixSocketRoundTrip is the floor: a 1 KiB echo over a unix
// socket between two goroutines of one process.
func BenchmarkRawUnixSocketRoundTrip(b *testing.B) {
	ln, err := net.Listen("unix", filepath.Join(b.TempDir(), "echo.sock"))
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
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
	}()
	conn, err := net.Dial("unix", ln.Addr().String())
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

func BenchmarkPluginGet1KiB(b *testing.B) { benchGet1KiB(b, benchPlugin(b, "mem")) }

func BenchmarkPluginPutCreateDelete(b *testing.B) { benchPutCreateDelete(b, benchPlugin(b, "mem")) }

func BenchmarkPluginList1000(b *testing.B) { benchList1000(b, benchPlugin(b, "mem")) }

func benchGet1KiB(b *testing.B, d core.Driver) {
	ctx := context.Background()
	body := bytes.Repeat([]byte("x"), 1024)
	if _, err := d.Put(ctx, "bench/get", bytes.NewReader(body), core.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 2048)
	b.SetBytes(1024)
	for b.Loop() {
		r, err := d.Get(ctx, "bench/get")
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.ReadFull(r, buf)
		if err != io.ErrUnexpectedEOF || n != 1024 {
			b.Fatalf("read %d bytes: %v", n, err)
		}
		r.Close()
	}
}

func benchPutCreateDelete(b *testing.B, d core.Driver) {
	ctx := context.Background()
	body := bytes.Repeat([]byte("x"), 1024)
	for b.Loop() {
		if _, err := d.Put(ctx, "bench/cas", bytes.NewReader(body), core.PutOptions{Mode: core.PutCreateIfAbsent}); err != nil {
			b.Fatal(err)
		}
		if err := d.Delete(ctx, "bench/cas", core.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func benchList1000(b *testing.B, d core.Driver) {
	ctx := context.Background()
	for i := range 1000 {
		if _, err := d.Put(ctx, fmt.Sprintf("bench/list/%04d", i), bytes.NewReader([]byte("x")), core.PutOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		page, err := d.List(ctx, core.ListOptions{Prefix: "bench/list/", PageSize: 1000})
		if err != nil {
			b.Fatal(err)
		}
		if len(page.Objects) != 1000 {
			b.Fatalf("listed %d objects", len(page.Objects))
		}
	}
}
