package storage

import (
	"os/exec"
	"strings"
	"testing"
)

func TestQuoteCapsLongInput(t *testing.T) {
	if got := Quote("nightly"); got != `"nightly"` {
		t.Fatalf("short: %s", got)
	}
	long := strings.Repeat("a", 20000)
	if got, want := Quote(long), `"`+strings.Repeat("a", MaxEcho)+`"… (20000 bytes)`; got != want {
		t.Fatalf("long: %s", got)
	}
	// Never cut inside a UTF-8 sequence.
	uni := strings.Repeat("a", MaxEcho-1) + "é" + strings.Repeat("b", 100)
	if got := Quote(uni); !strings.HasPrefix(got, `"`+strings.Repeat("a", MaxEcho-1)+`"…`) {
		t.Fatalf("utf-8: %s", got)
	}
}

// An error naming a refused key repeats only its first bytes; a real
// object's key is shown in full.
func TestErrorCapsRefusedKey(t *testing.T) {
	long := strings.Repeat("k", 20000)
	if msg := ValidateKey("put", long).Error(); len(msg) > 300 || !strings.Contains(msg, "(20000 bytes)") {
		t.Fatalf("refused key echoed in full (%d bytes): %.200s", len(msg), msg)
	}
	key := "warehouse/events.lance/data/" + strings.Repeat("0", 64) + ".lance"
	if msg := Errorf("get", key, ErrNotFound, "gone").Error(); !strings.Contains(msg, key) {
		t.Fatalf("real key cut: %s", msg)
	}
}

// A word a message puts on a command line survives the shell as it was.
func TestShellWord(t *testing.T) {
	for _, s := range []string{"", "plain/path.lance", "has space", `"etag"`, "it's", "-.9e26f4.18ed.21e", "a$b`c`", "ünï"} {
		out, err := exec.Command("sh", "-c", "printf %s "+ShellWord(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("ShellWord(%q) = %s: the shell gives back %q (%v)", s, ShellWord(s), out, err)
		}
	}
	if ShellWord("s3://b/p") != "s3://b/p" {
		t.Errorf("a plain URI is quoted: %s", ShellWord("s3://b/p"))
	}
}
