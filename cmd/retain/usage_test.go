package main

import (
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
