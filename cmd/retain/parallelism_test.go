package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// --parallelism (or RETAIN_PARALLELISM) bounds the requests in flight to
// the store; without it the adapter's default holds (localfs: 4). Out of
// range, or not a number, is a usage error naming the flag.
func TestParallelismFlag(t *testing.T) {
	db := fixtureDB(t, "v2-appends")
	parallelism := func(env []string, args ...string) int {
		t.Helper()
		out, errs, code := retainEnv(t, env, append([]string{"status", db, "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("status %v: exit %d: %s", args, code, errs)
		}
		var st struct{ Parallelism int }
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatal(err)
		}
		return st.Parallelism
	}
	if got := parallelism(nil); got != 4 {
		t.Errorf("default parallelism on localfs: %d, want 4", got)
	}
	if got := parallelism(nil, "--parallelism", "13"); got != 13 {
		t.Errorf("--parallelism 13: %d", got)
	}
	if got := parallelism([]string{"RETAIN_PARALLELISM=7"}); got != 7 {
		t.Errorf("RETAIN_PARALLELISM=7: %d", got)
	}
	for _, bad := range []struct {
		env  []string
		args []string
	}{
		{nil, []string{"--parallelism", "1000"}},
		{nil, []string{"--parallelism", "-2"}},
		{[]string{"RETAIN_PARALLELISM=lots"}, nil},
	} {
		_, errs, code := retainEnv(t, bad.env, append([]string{"status", db}, bad.args...)...)
		if code != 2 || !strings.Contains(errs, "--parallelism must be between 1 and 256") {
			t.Errorf("%v %v: exit %d, %s", bad.env, bad.args, code, errs)
		}
	}
}

// --max-rps (RETAIN_MAX_RPS) caps the request rate; a negative or
// non-numeric cap is a usage error naming the flag.
func TestMaxRPSFlag(t *testing.T) {
	db := fixtureDB(t, "v2-appends")
	if _, errs, code := retain(t, "status", db, "--max-rps", "500"); code != 0 {
		t.Fatalf("--max-rps 500: exit %d: %s", code, errs)
	}
	for _, bad := range []struct {
		env  []string
		args []string
	}{
		{nil, []string{"--max-rps", "-1"}},
		{[]string{"RETAIN_MAX_RPS=fast"}, nil},
	} {
		_, errs, code := retainEnv(t, bad.env, append([]string{"status", db}, bad.args...)...)
		if code != 2 || !strings.Contains(errs, "--max-rps must be a positive number") {
			t.Errorf("%v %v: exit %d, %s", bad.env, bad.args, code, errs)
		}
	}
}
