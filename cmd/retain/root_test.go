package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// decodeJSONError decodes stdout as exactly one {"error":{...}} object.
func decodeJSONError(t *testing.T, out string) (kind, message, next string) {
	t.Helper()
	var v struct {
		Error *struct {
			Kind    string  `json:"kind"`
			Message string  `json:"message"`
			Next    *string `json:"next"`
		} `json:"error"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil || v.Error == nil {
		t.Fatalf("stdout is not one JSON error object (%v):\n%s", err, out)
	}
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		t.Fatalf("stdout holds more than one JSON value:\n%s", out)
	}
	if v.Error.Next != nil {
		if *v.Error.Next == "" {
			t.Fatalf(`"next" is present but empty: %s`, out)
		}
		next = *v.Error.Next
	}
	return v.Error.Kind, v.Error.Message, next
}

// With --json a failing command prints one JSON error object on stdout
// with the documented exit status; the plain line stays on stderr for the
// person at the terminal. Without --json stdout stays empty.
func TestJSONErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name             string
		args             []string
		code             int
		kind, next, text string
	}{
		{"usage error naming the next command", []string{"claim", "takeover", dir, "--json"}, 2, "invalid argument", "retain claim status STORE", "--token"},
		{"usage error naming none", []string{"cleanup", "preview", dir, "--json"}, 2, "invalid argument", "", "--keep-last"},
		{"unknown flag before --json", []string{"checkpoint", "list", dir, "--bogus", "--json"}, 2, "invalid argument", "", "unknown flag: --bogus"},
		{"unknown command", []string{"--json", "checkpoint", "lst"}, 2, "invalid argument", "retain checkpoint", "unknown command"},
		{"operation failed", []string{"checkpoint", "show", "nope", dir, "--json"}, 1, "not found", "", "nope"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, errs, code := retain(t, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, c.code, out, errs)
			}
			kind, msg, next := decodeJSONError(t, out)
			if kind != c.kind || next != c.next || !strings.Contains(msg, c.text) {
				t.Fatalf("kind %q next %q message %q; want %q %q and %q\n%s", kind, next, msg, c.kind, c.next, c.text, out)
			}
			if strings.TrimSpace(errs) != "retain: "+msg {
				t.Fatalf("stderr is not the plain line of the same message:\n%s", errs)
			}
			text := c.args[:0:0]
			for _, a := range c.args {
				if a != "--json" {
					text = append(text, a)
				}
			}
			out, errs2, code2 := retain(t, text...)
			if out != "" || code2 != code || errs2 != errs {
				t.Fatalf("text mode changed: exit %d stdout %q stderr %q", code2, out, errs2)
			}
		})
	}
}

func TestLogLevelValidated(t *testing.T) {
	for _, args := range [][]string{{"--log-level", "verbose", "version"}, {"version", "--log-level=WARNING"}} {
		out, errs, code := retain(t, args...)
		if code != 2 || out != "" || !strings.Contains(errs, "trace, debug, info, warn, error, off") {
			t.Fatalf("%v: exit %d %q %s", args, code, out, errs)
		}
	}
	_, errs, code := retainEnv(t, []string{"RETAIN_LOG=loud"}, "version")
	if code != 2 || !strings.Contains(errs, "RETAIN_LOG") {
		t.Fatalf("RETAIN_LOG=loud: exit %d %s", code, errs)
	}
	for _, l := range []string{"trace", "DEBUG", "off"} {
		if _, errs, code := retain(t, "--log-level", l, "version"); code != 0 {
			t.Fatalf("--log-level %s: exit %d %s", l, code, errs)
		}
	}
}

func TestRootVersionFlag(t *testing.T) {
	for _, mode := range [][]string{nil, {"--json"}} {
		want, _, code := retain(t, append([]string{"version"}, mode...)...)
		if code != 0 || want == "" {
			t.Fatalf("version: %d %q", code, want)
		}
		got, errs, code := retain(t, append([]string{"--version"}, mode...)...)
		if code != 0 || got != want {
			t.Fatalf("--version %v: exit %d\n%q\nwant %q\n%s", mode, code, got, want, errs)
		}
	}
	if out, _, code := retain(t, "--help"); code != 0 || strings.Contains(out, "reserved") || !strings.Contains(out, "s3://") {
		t.Fatalf("root help: %d\n%s", code, out)
	}
}

// Durations take days and weeks in flags and in the daemon config.
func TestDurationsInDaysAndWeeks(t *testing.T) {
	db := t.TempDir()
	for _, d := range []string{"7d", "2w", "1w2d", "36h"} {
		if out, errs, code := retain(t, "cleanup", "preview", db, "--older-than", d, "--json"); code != 0 || !json.Valid([]byte(out)) {
			t.Fatalf("--older-than %s: exit %d %s %s", d, code, out, errs)
		}
	}
	if _, errs, code := retain(t, "audit", db, "--since", "1w"); code != 0 {
		t.Fatalf("--since 1w: exit %d %s", code, errs)
	}
	if _, errs, code := retain(t, "cleanup", "preview", db, "--older-than", "7days"); code != 2 || !strings.Contains(errs, "7d, 2w, 1w2d or 36h") {
		t.Fatalf("--older-than 7days: exit %d %s", code, errs)
	}
	cfg := filepath.Join(t.TempDir(), "daemon.yaml")
	os.WriteFile(cfg, []byte("interval: 1d\nretention:\n  older_than: 7d\n  every: 1w2d\n"), 0o644)
	due := func() string { return "next_due=" + time.Now().UTC().Add(9*24*time.Hour).Format("2006-01-02") }
	before := due()
	_, errs, code := retain(t, "daemon", db, "--config", cfg, "--once")
	if code != 0 || !strings.Contains(errs, before) && !strings.Contains(errs, due()) {
		t.Fatalf("daemon config in days: exit %d\n%s", code, errs)
	}
	os.WriteFile(cfg, []byte("retention:\n  older_than: 7 days\n"), 0o644)
	if _, errs, code := retain(t, "daemon", db, "--config", cfg, "--once"); code != 2 || !strings.Contains(errs, "7d, 2w") {
		t.Fatalf("daemon config with a bad duration: exit %d\n%s", code, errs)
	}
}
