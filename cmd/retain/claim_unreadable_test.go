package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A torn claim object (a crash mid-write, a bad restore, an operator's
// editor) is reported by `claim status` with its version and the one way
// out; every command that needs the claim names that way out; takeover
// --unreadable clears it only with a reason, an attestation and the exact
// version, says what it cleared, and the next operation acquires the claim.
func TestTornClaimClearedByAttestedTakeover(t *testing.T) {
	t.Parallel() // a process-bound test: it waits on retain, Lance and emulators, not the CPU
	for name, body := range map[string]string{
		"truncated JSON": `{"format":1,"operation_id":"op-1","action":"clea`,
		"random bytes":   "\x9f\x00\xff\x137\xc3(\x7b\n",
		"empty object":   "",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			key := filepath.Join(dir, "__leases", "retention.json")
			if err := os.MkdirAll(filepath.Dir(key), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(key, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			out, errs, code := retain(t, "claim", "status", dir, "--json")
			var st struct {
				Held       bool
				Unreadable *struct{ Version, Why, Next string }
			}
			if code != 0 || json.Unmarshal([]byte(out), &st) != nil || !st.Held || st.Unreadable == nil || st.Unreadable.Version == "" {
				t.Fatalf("status --json: exit %d %s %s", code, out, errs)
			}
			v := st.Unreadable.Version
			way := "retain claim takeover STORE --unreadable=" + v + " --reason R --owner-dead-attested WHY"
			if want := strings.Replace(way, "STORE", dir, 1); st.Unreadable.Next != want {
				t.Fatalf("next: %q, want %q", st.Unreadable.Next, want)
			}
			out, errs, code = retain(t, "claim", "status", dir)
			if code != 0 || !strings.Contains(out, "UNREADABLE") || !strings.Contains(out, st.Unreadable.Next) {
				t.Fatalf("status: exit %d %s %s", code, out, errs)
			}
			if out, errs, code := retain(t, "status", dir); code != 0 || !strings.Contains(out, "UNREADABLE") || !strings.Contains(out, st.Unreadable.Next) {
				t.Fatalf("retain status: exit %d %s %s", code, out, errs)
			}
			for _, args := range [][]string{
				{"reconcile", dir},
				{"cleanup", "run", dir, "--confirm-write-outage", "--keep-last", "1"},
				{"branch", "delete", "b", dir},
				{"claim", "takeover", dir, "--token", "x", "--reason", "r"},
			} {
				if _, errs, code := retain(t, args...); code != 1 || !strings.Contains(errs, way) {
					t.Errorf("%v on a torn claim: exit %d %s", args, code, errs)
				}
			}
			for _, c := range []struct {
				args []string
				code int
			}{
				{[]string{"--unreadable=" + v, "--reason", "torn"}, 2},                                  // no attestation
				{[]string{"--unreadable=" + v, "--owner-dead-attested", "none runs"}, 2},                // no reason
				{[]string{"--unreadable=" + v, "--token", "x", "--reason", "r"}, 2},                     // both
				{[]string{"--unreadable=" + v + "x", "--reason", "r", "--owner-dead-attested", "a"}, 1}, // another version
			} {
				if _, errs, code := retain(t, append([]string{"claim", "takeover", dir}, c.args...)...); code != c.code {
					t.Errorf("takeover %v: exit %d, want %d: %s", c.args, code, c.code, errs)
				}
			}
			if b, err := os.ReadFile(key); err != nil || string(b) != body {
				t.Fatalf("a refused command touched the torn claim: %q %v", b, err)
			}

			out, errs, code = retain(t, "claim", "takeover", dir, "--unreadable", v, "--reason", "torn write after a crash",
				"--owner-dead-attested", "the cleanup cron is stopped on every host", "--json")
			var rep struct {
				TakenOver struct {
					Reason, Attested string
					Unreadable       struct{ Version, SHA256 string }
				} `json:"taken_over"`
				Released bool
			}
			if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || !rep.Released || rep.TakenOver.Unreadable.Version != v ||
				rep.TakenOver.Attested != "the cleanup cron is stopped on every host" || len(rep.TakenOver.Unreadable.SHA256) != 64 {
				t.Fatalf("takeover --unreadable: exit %d %s %s", code, out, errs)
			}
			if !strings.Contains(errs, "retention claim taken over") || !strings.Contains(errs, "the cleanup cron is stopped on every host") {
				t.Fatalf("the takeover was not logged with its attestation: %s", errs)
			}
			if out, errs, code := retain(t, "claim", "status", dir, "--json"); code != 0 || !strings.Contains(out, `"held": false`) {
				t.Fatalf("after clearing: exit %d %s %s", code, out, errs)
			}
			if _, errs, code := retain(t, "reconcile", dir); code != 0 {
				t.Fatalf("reconcile after clearing: exit %d %s", code, errs)
			}
		})
	}
}
