package conformance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// createModel: one register per key that starts absent; create succeeds
// only on an absent key, reads return what the winner wrote.
var createModel = porcupine.Model{
	Partition: partitionByKey,
	Init:      func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		st, op := state.(string), input.(histOp)
		switch op.Kind {
		case "create":
			if op.OK {
				return st == "", op.Value
			}
			return st != "" && op.ErrKind == "already exists", st
		case "read":
			return op.OK && st == op.Value, st
		}
		return false, st
	},
	DescribeOperation: describe,
	DescribeState:     func(s any) string { return fmt.Sprintf("%q", s) },
}

type casState struct{ value, version string }

// casModel returns a model of one versioned register: reads return the
// current value and version; a replace succeeds exactly when its expected
// version is current, and then installs its value with the new version.
func casModel(initial histOp) porcupine.Model {
	return porcupine.Model{
		Partition: partitionByKey,
		Init:      func() any { return casState{initial.Value, initial.Version} },
		Step: func(state, input, output any) (bool, any) {
			st, op := state.(casState), input.(histOp)
			switch op.Kind {
			case "read":
				return op.OK && op.Value == st.value && op.Version == st.version, st
			case "cas":
				if op.OK {
					return op.Expect == st.version, casState{op.Value, op.Version}
				}
				return op.ErrKind == "precondition failed" && op.Expect != st.version, st
			}
			return false, st
		},
		DescribeOperation: describe,
		DescribeState:     func(s any) string { st := s.(casState); return fmt.Sprintf("%s@%.12s", st.value, st.version) },
	}
}

// regState is a versioned register that may be absent.
type regState struct {
	value, version string
	present        bool
}

// registerModel: one versioned register per key that starts absent; a put
// installs its value and version; a delete-if-version succeeds when the
// register holds that version, is refused (precondition failed) when it
// holds another, and answers not found, or ok, when absent; a read returns
// the value and version, or not found. A conditional delete that lost to
// another delete may answer ok, as S3's idempotent DeleteObject does
// (versitygw answers two concurrent deletes of one version so); nothing
// relies on that answer, while a delete that removes a newer version is
// never explained.
var registerModel = porcupine.Model{
	Partition: partitionByKey,
	Init:      func() any { return regState{} },
	Step: func(state, input, output any) (bool, any) {
		st, op := state.(regState), input.(histOp)
		switch op.Kind {
		case "put":
			return op.OK, regState{op.Value, op.Version, true}
		case "cdelete":
			switch {
			case op.OK:
				return !st.present || st.version == op.Expect, regState{}
			case op.ErrKind == "not found":
				return !st.present, st
			case op.ErrKind == "precondition failed":
				return st.present && st.version != op.Expect, st
			}
		case "read":
			if !op.OK {
				return op.ErrKind == "not found" && !st.present, st
			}
			return st.present && op.Value == st.value && op.Version == st.version, st
		}
		return false, st
	},
	DescribeOperation: describe,
	DescribeState: func(s any) string {
		st := s.(regState)
		if !st.present {
			return "absent"
		}
		return fmt.Sprintf("%s@%.12s", st.value, st.version)
	},
}

func describe(input, output any) string {
	op := input.(histOp)
	res := "ok"
	if !op.OK {
		res = op.ErrKind
	}
	switch op.Kind {
	case "cas":
		return fmt.Sprintf("cas(%.12s → %s) %s", op.Expect, op.Value, res)
	case "read":
		if !op.OK {
			return "read → " + op.ErrKind
		}
		return fmt.Sprintf("read → %q @%.12s", op.Value, op.Version)
	case "cdelete":
		return fmt.Sprintf("delete-if(%.12s) %s", op.Expect, res)
	}
	return fmt.Sprintf("%s(%q) %s", op.Kind, op.Value, res)
}

func partitionByKey(h []porcupine.Operation) [][]porcupine.Operation {
	by := map[string][]porcupine.Operation{}
	var keys []string
	for _, o := range h {
		k := o.Input.(histOp).Key
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], o)
	}
	sort.Strings(keys)
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, by[k])
	}
	return out
}

// caseLinearizability checks the histories the race and compare-and-swap
// cases recorded (call and return times are wall-clock nanoseconds of
// processes on one host). A history that no sequential order explains fails
// the case, and porcupine's visualisation is written next to the report.
func caseLinearizability(t T, e *Env) {
	if len(e.s.histories) == 0 {
		t.Skip("no concurrent history was recorded: run it with create-if-absent-race, compare-and-swap or conditional-delete-race")
	}
	var unknown []string
	for _, h := range e.s.histories {
		ops := make([]porcupine.Operation, len(h.ops))
		for i, o := range h.ops {
			ops[i] = porcupine.Operation{ClientId: o.Client, Input: o, Output: o, Call: o.Call, Return: o.Ret}
		}
		model := createModel
		switch h.model {
		case "cas":
			model = casModel(h.initial)
		case "register":
			model = registerModel
		}
		res, info := porcupine.CheckOperationsVerbose(model, ops, time.Minute)
		switch res {
		case porcupine.Ok:
			t.Logf("%s: %d operations linearizable", h.name, len(ops))
		case porcupine.Unknown:
			t.Logf("%s: porcupine timed out on %d operations; not proven either way", h.name, len(ops))
			unknown = append(unknown, h.name)
		case porcupine.Illegal:
			dir := e.Config.ReportDir
			if dir == "" {
				dir = "."
			}
			path := filepath.Join(dir, fmt.Sprintf("linearizability-%s-%s.html", e.Config.fileName(), h.name))
			if err := os.MkdirAll(dir, 0o755); err == nil {
				if err := porcupine.VisualizePath(model, info, path); err == nil {
					e.s.artifacts = append(e.s.artifacts, path)
				}
				// The raw history too, for replaying the check.
				if b, err := json.MarshalIndent(h.ops, "", " "); err == nil {
					raw := strings.TrimSuffix(path, ".html") + ".json"
					if os.WriteFile(raw, b, 0o644) == nil {
						e.s.artifacts = append(e.s.artifacts, raw)
					}
				}
			}
			t.Fatalf("%s: the history of %d operations is not linearizable; visualisation: %s", h.name, len(ops), path)
		}
	}
	if len(unknown) > 0 {
		t.Skipf("porcupine timed out on %v: not proven either way", unknown)
	}
}
