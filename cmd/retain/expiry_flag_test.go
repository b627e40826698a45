package main

import (
	"strings"
	"testing"
)

// --expires takes a moment as well as a duration: a retry of a branch
// create after a lost reply then asks for the same expiry and succeeds,
// where a duration would ask for a later one and conflict. A moment in the
// past, or nonsense, is a usage error.
func TestExpiresTakesAMoment(t *testing.T) {
	db := fixtureDB(t, "branch-tag")
	uri := db + "/branch-tag.lance"
	for i := 0; i < 2; i++ {
		if out, errs, code := retain(t, "branch", "create", "exp", uri, "--from", "main@2", "--expires", "2030-01-01T00:00:00Z"); code != 0 {
			t.Fatalf("create %d: %d %s %s", i+1, code, out, errs)
		}
	}
	if _, errs, code := retain(t, "branch", "create", "exp", uri, "--from", "main@2", "--expires", "7d"); code == 0 {
		t.Fatalf("a retry asking for another expiry was accepted: %s", errs)
	}
	out, _, _ := retain(t, "branch", "list", uri, "--json")
	if !strings.Contains(out, "2030-01-01T00:00:00Z") {
		t.Fatalf("the branch does not carry the moment asked for:\n%s", out)
	}
	if _, errs, code := retain(t, "tag", "create", "t1", uri, "--version", "1", "--expires", "2030-01-01T00:00:00Z"); code != 0 {
		t.Fatalf("tag create with a moment: %d %s", code, errs)
	}
	for _, bad := range []string{"2001-01-01T00:00:00Z", "soon", "-2h"} {
		if _, errs, code := retain(t, "tag", "create", "t2", uri, "--version", "1", "--expires", bad); code != 2 || !strings.Contains(errs, "--expires") {
			t.Errorf("--expires %s: %d %s", bad, code, errs)
		}
	}
}
