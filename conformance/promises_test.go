package conformance_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/retain-dev/retain/conformance"
)

// Every promise names cases that exist, every case belongs to a promise,
// and every promise has two cases or more but the three that one case
// alone can exercise.
func TestPromisesNameRealCases(t *testing.T) {
	var names []string
	for _, c := range conformance.Cases() {
		names = append(names, c.Name)
	}
	covered := map[string]bool{}
	for _, p := range conformance.Promises() {
		for _, c := range p.Cases {
			if !slices.Contains(names, c) {
				t.Errorf("promise %q names case %q, which does not exist", p.Name, c)
			}
			covered[c] = true
		}
		if len(p.Cases) < 2 && !slices.Contains([]string{"batch reads", "read-only opens", "nothing left behind"}, p.Name) {
			t.Errorf("promise %q has one case (%v): give it a second, or say why it cannot have one", p.Name, p.Cases)
		}
	}
	for _, n := range names {
		if !covered[n] {
			t.Errorf("case %s proves no promise", n)
		}
	}
}

// A filtered run names what it did not check.
func TestFilteredRunNamesUncheckedPromises(t *testing.T) {
	rep, err := conformance.Run(context.Background(), conformance.Config{Adapter: "memory", InProcess: true, Adapters: adapters, Run: "^contract/CreateIfAbsent$"})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(rep.Unchecked, "create-if-absent") || !slices.Contains(rep.Unchecked, "delete-if-version") || !slices.Contains(rep.Unchecked, "read-only opens") {
		t.Fatalf("unchecked after a run of contract/CreateIfAbsent alone: %v", rep.Unchecked)
	}
	var sb strings.Builder
	rep.WriteTable(&sb)
	if !strings.Contains(sb.String(), "not checked by this run: ") || !strings.Contains(sb.String(), "delete-if-version") {
		t.Fatalf("the table does not name the unchecked promises:\n%s", sb.String())
	}
}

// A case the configuration names as broken on the backend is reported as
// known broken with its reason, not run, and the table says so.
func TestSkippedCaseIsKnownBroken(t *testing.T) {
	rep, err := conformance.Run(context.Background(), conformance.Config{Adapter: "memory", InProcess: true, Adapters: adapters,
		Run: "^contract/Missing$", Skip: map[string]string{"contract/Missing": "the backend answers unknown for a missing key"}})
	if err != nil {
		t.Fatal(err)
	}
	c, ok := rep.Case("contract/Missing")
	if !ok || !c.KnownBroken || c.Result != conformance.Skip || !strings.Contains(c.Reason, "answers unknown") {
		t.Fatalf("a case named in Skip: %+v", c)
	}
	var sb strings.Builder
	rep.WriteTable(&sb)
	if !strings.Contains(sb.String(), "known broken on this backend, not run: contract/Missing") {
		t.Fatalf("the table does not say the case is known broken:\n%s", sb.String())
	}
	_, err = conformance.Run(context.Background(), conformance.Config{Adapter: "memory", InProcess: true, Adapters: adapters,
		Skip: map[string]string{"no-such-case": "x"}})
	if err == nil {
		t.Fatal("a Skip naming no case was accepted")
	}
}
