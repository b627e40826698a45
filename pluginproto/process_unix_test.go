//go:build unix

package pluginproto

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

func kill(t *testing.T, pid int) {
	t.Helper()
	if pid <= 0 {
		t.Fatalf("no plugin pid")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
}

func TestPluginKilledMidCall(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs SIGKILL")
	}
	cases := map[string]func(ctx context.Context, c *Client, started chan<- struct{}) error{
		"stat": func(ctx context.Context, c *Client, started chan<- struct{}) error {
			close(started)
			_, err := c.Stat(ctx, "block/x")
			return err
		},
		"stat-unary": func(ctx context.Context, c *Client, started chan<- struct{}) error {
			close(started)
			_, err := c.Stat(ctx, "block/x")
			return err
		},
		"stat-many": func(ctx context.Context, c *Client, started chan<- struct{}) error {
			close(started)
			_, err := c.StatMany(ctx, []string{"a", "block/x"})
			return err
		},
		"get-many": func(ctx context.Context, c *Client, started chan<- struct{}) error {
			close(started)
			_, err := c.GetMany(ctx, []string{"a", "block/x"}, 1<<20)
			return err
		},
		"get-body": func(ctx context.Context, c *Client, started chan<- struct{}) error {
			r, err := c.Get(ctx, "slowbody/x")
			if err != nil {
				return err
			}
			if _, err := io.ReadFull(r, make([]byte, 1<<20)); err != nil {
				return err
			}
			close(started)
			_, err = io.ReadAll(r)
			return err
		},
		"put-body": func(ctx context.Context, c *Client, started chan<- struct{}) error {
			pr, pw := io.Pipe()
			go func() {
				pw.Write(make([]byte, 3<<20))
				close(started)
				<-ctx.Done()
				pw.CloseWithError(ctx.Err())
			}()
			_, err := c.Put(ctx, "k", pr, storage.PutOptions{})
			return err
		},
	}
	for name, call := range cases {
		t.Run(name, func(t *testing.T) {
			mode := "mem" // calls over the session
			if strings.HasSuffix(name, "-unary") {
				mode = "legacy"
			}
			c := launch(t, mode)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			started := make(chan struct{})
			errc := make(chan error, 1)
			go func() { errc <- call(ctx, c, started) }()
			select {
			case <-started:
			case err := <-errc:
				t.Fatalf("call ended early: %v", err)
			case <-time.After(10 * time.Second):
				t.Fatal("call did not start")
			}
			time.Sleep(200 * time.Millisecond) // let the call reach the plugin
			kill(t, c.pid())
			select {
			case err := <-errc:
				ce := wantKind(t, err, storage.ErrUnavailable)
				for _, s := range []string{`"testmem"`, "exited or crashed", "outcome of the call is unknown"} {
					if !strings.Contains(ce.Error(), s) {
						t.Errorf("message %q lacks %q", ce.Error(), s)
					}
				}
				t.Log(err)
			case <-time.After(5 * time.Second):
				t.Fatal("the call hung after the plugin was killed")
			}
			// Later calls fail the same way, promptly.
			_, err := c.Stat(ctx, "a")
			wantKind(t, err, storage.ErrUnavailable)
		})
	}
}

func TestClose(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	c := launch(t, "mem")
	pid := c.pid()
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 1500*time.Millisecond {
		t.Errorf("close took %v: the plugin did not shut down gracefully", el)
	}
	if !processGone(pid) {
		t.Errorf("plugin %d still running after Close", pid)
	}
	_, err := c.Stat(ctx, "a")
	wantKind(t, err, storage.ErrInvalidArgument)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// processGone reports whether pid has exited: no such process, or a zombie
// waiting to be reaped by whoever adopted it.
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		if runtime.GOOS != "linux" {
			return syscall.Kill(pid, 0) == syscall.ESRCH
		}
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	state := s[i+2]
	return state == 'Z' || state == 'X'
}

func TestHostKilledPluginExits(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	for _, mode := range []string{"host", "host-nopdeathsig"} {
		t.Run(mode, func(t *testing.T) {
			host := exec.Command(testExe())
			host.Env = append(os.Environ(), envMode+"="+mode)
			host.Stderr = os.Stderr
			out, err := host.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := host.Start(); err != nil {
				t.Fatal(err)
			}
			var pid int
			t.Cleanup(func() {
				host.Process.Kill()
				host.Wait()
				if pid > 0 {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			line := make(chan string, 1)
			go func() {
				s, _ := bufio.NewReader(out).ReadString('\n')
				line <- s
			}()
			select {
			case s := <-line:
				pid, err = strconv.Atoi(strings.TrimSpace(s))
				if err != nil {
					t.Fatalf("host said %q", s)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("host did not report its plugin")
			}
			if processGone(pid) {
				t.Fatalf("plugin %d is not running", pid)
			}
			if err := host.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			host.Wait()
			killed := time.Now()
			for !processGone(pid) {
				if time.Since(killed) > 5*time.Second {
					t.Fatalf("plugin %d still running 5s after its host was killed", pid)
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Logf("plugin gone %v after its host", time.Since(killed))
		})
	}
}
