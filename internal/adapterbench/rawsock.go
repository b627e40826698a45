package adapterbench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// echoEnv makes a test binary whose TestMain calls Dispatch the echo server
// of RawRoundTripProcesses, listening at the unix socket it names.
const echoEnv = "RETAIN_ADAPTERBENCH_ECHO"

// RawRoundTripGoroutines is the floor under the plugin boundary: a 1 KiB
// write and its 1 KiB echo back per op over a unix socket, with no gRPC,
// TLS or protobuf, echoed by another goroutine of this process.
func RawRoundTripGoroutines(b *testing.B) {
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
	roundTrips(b, sock)
}

// RawRoundTripProcesses is RawRoundTripGoroutines echoed by another process,
// as a plugin answers: this test binary re-executed, which Dispatch turns
// into the echo server.
func RawRoundTripProcesses(b *testing.B) {
	sock := filepath.Join(b.TempDir(), "echo.sock")
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), echoEnv+"="+sock)
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
	roundTrips(b, sock)
}

// roundTrips writes 1 KiB to the echo server at sock and reads it back, per op.
func roundTrips(b *testing.B, sock string) {
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

// serveEcho is the echo process: it listens at sock, says "ready" on
// stdout, and echoes one connection until it ends.
func serveEcho(sock string) int {
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
