package conformance

import "sort"

// Promise is one thing an adapter declares or the contract demands, and
// the cases that catch an adapter breaking it. Each promise has two cases
// or more where the behaviour allows, so that a run filtered with --run
// that leaves one out still checks it; the report names every promise a
// filtered run did not check.
type Promise struct {
	Name  string
	Cases []string
}

// Promises returns the promises the suite proves and the cases of each.
func Promises() []Promise {
	return []Promise{
		{"bodies round-trip", []string{"contract/RoundTrip", "contract/LargeObject", "contract/AtomicVisibility"}},
		{"create-if-absent", []string{"contract/CreateIfAbsent", "create-if-absent-race", "capability-honesty", "claim", "linearizability"}},
		{"replace-if-version", []string{"contract/ReplaceIfVersion", "compare-and-swap", "capability-honesty", "contract/ReplaceSameBytes"}},
		{"delete-if-version", []string{"contract/DeleteIfVersion", "conditional-delete", "conditional-delete-race", "capability-honesty", "claim"}},
		{"a new version at every write", []string{"contract/OverwriteChangesVersion", "contract/ReplaceSameBytes", "linearizability"}},
		{"error kinds", []string{"contract/Missing", "contract/InvalidKeys", "contract/CreateIfAbsent", "contract/DeleteIfVersion"}},
		{"ordered listing", []string{"contract/ListOrder", "contract/ListPaging", "contract/ListStartAfterNotAKey", "contract/ListLevel"}},
		{"listing agrees with stat and get", []string{"contract/ListAgreesWithStat", "contract/ListOrder", "list-after-write"}},
		{"list-after-write", []string{"list-after-write", "contract/ListAgreesWithStat"}},
		{"bounded listing", []string{"contract/ListLimit", "declared-limits"}},
		{"whole bodies to readers", []string{"contract/AtomicVisibility", "contract/CreateVisibility"}},
		{"batch delete", []string{"contract/DeleteMany", "declared-limits"}},
		{"batch reads", []string{"contract/BatchReads"}},
		{"declared limits", []string{"declared-limits", "capability-honesty"}},
		{"gates", []string{"contract/Gates", "gates"}},
		{"declared none is unsupported", []string{"contract/DeclaredNoneIsUnsupported", "capability-honesty"}},
		{"read-only opens", []string{"read-only"}},
		{"nothing left behind", []string{"hygiene"}},
	}
}

// unchecked returns the promises none of whose cases ran.
func unchecked(ran map[string]bool) []string {
	var out []string
	for _, p := range Promises() {
		checked := false
		for _, c := range p.Cases {
			checked = checked || ran[c]
		}
		if !checked {
			out = append(out, p.Name)
		}
	}
	sort.Strings(out)
	return out
}
