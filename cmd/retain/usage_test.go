package main

import (
	"slices"
	"strings"
	"testing"
)

// A mistyped subcommand is a usage error (exit 2) naming the command meant,
// never a help page with exit 0 that a script takes for success.
func TestUnknownSubcommandExits2WithSuggestion(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"checkpoint", "creat", "nightly", dir}, "did you mean `retain checkpoint create`?"},
		{[]string{"tag", "craete", "v1", dir}, "did you mean `retain tag create`?"},
		{[]string{"cleanup", "runs", dir}, "did you mean `retain cleanup run`?"},
		{[]string{"claim", "stauts", dir}, "did you mean `retain claim status`?"},
		{[]string{"checkpont", "list", dir}, "did you mean `retain checkpoint`?"},
		{[]string{"claim", "--json", "frobnicate"}, `unknown command "frobnicate" for ` + "`retain claim`"},
	} {
		out, errs, code := retain(t, c.args...)
		if slices.Contains(c.args, "--json") {
			if _, msg, _ := decodeJSONError(t, out); strings.Contains(msg, c.want) {
				out = "" // the JSON error object --json prints; the rest as text
			}
		}
		if code != 2 || !strings.Contains(errs, c.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.args, code, out, errs, c.want)
		}
	}
	// A group command alone still shows its help.
	out, errs, code := retain(t, "checkpoint")
	if code != 0 || !strings.Contains(out, "Available Commands") {
		t.Errorf("bare group: exit %d %s %s", code, out, errs)
	}
}

// A pasted 20 KB name, key or URI is repeated in an error as its first 64
// bytes and its length, whichever command and check refuses it.
func TestEchoedInputIsCapped(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("a", 20000)
	for _, args := range [][]string{
		{long},
		{"checkpoint", long},
		{"--" + long},
		{"checkpoint", "create", long, dir},
		{"checkpoint", "show", long, dir},
		{"checkpoint", "delete", long, dir},
		{"branch", "delete", long, dir},
		{"inspect", "--branch", long + "+", dir},
		{"tag", "create", "v1", dir + "/t.lance", "--meta", long},
		{"tag", "list", dir + "/t.lance", "--filter", long},
		{"cleanup", "run", dir, "--abandon", long},
		{"tag", "create", "v1", long},
		{"inspect", long},
		{"claim", "status", "file:///" + long},
		{"claim", "status", "s3://" + long},
		{"quickstart", dir + "/" + long},
	} {
		_, errs, code := retain(t, args...)
		if code == 0 || len(errs) > 600 || !strings.Contains(errs, "bytes)") {
			t.Errorf("%.40q…: exit %d, %d bytes of stderr: %.300s", args, code, len(errs), errs)
		}
	}
}

// `file://STORE#frag` is refused (exit 2), not opened as STORE.
func TestStoreURIFragmentRefused(t *testing.T) {
	dir := t.TempDir()
	for _, uri := range []string{"file://" + dir + "#frag", "file://" + dir + "/t.lance#v3"} {
		out, errs, code := retain(t, "claim", "status", uri)
		if code != 2 || !strings.Contains(errs, "fragment") {
			t.Errorf("%s: exit %d %s %s", uri, code, out, errs)
		}
	}
}
