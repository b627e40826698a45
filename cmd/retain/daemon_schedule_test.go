package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/checkpoint"
)

// Two daemon processes with the same schedule on one store create each
// slot's checkpoint exactly once: every slot name is logged as created by
// one of them only, and every created one is in the registry unless the
// rotation removed it.
func TestTwoDaemonsTakeEachSlotOnce(t *testing.T) {
	db := fixtureDB(t, "v2-appends")
	cfg := filepath.Join(t.TempDir(), "daemon.yaml")
	err := os.WriteFile(cfg, []byte(`interval: 100ms
checkpoints:
  - name: "slot/{{.Time}}"
    every: 1s
    keep: {last: 3}
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	a := startDaemon(t, nil, "daemon", db, "--config", cfg, "--identity", "replica-a", "--metrics-addr", "")
	b := startDaemon(t, nil, "daemon", db, "--config", cfg, "--identity", "replica-b", "--metrics-addr", "")
	// Run until at least 6 slots were created between them.
	created := regexp.MustCompile(`checkpoint_scheduled: .*name=(slot/\S+)`)
	deadline := time.Now().Add(90 * time.Second)
	for {
		n := len(created.FindAllString(a.output()+b.output(), -1))
		if n >= 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d slots taken in 90s:\n--- a\n%s\n--- b\n%s", n, a.output(), b.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, d := range []*daemonProc{a, b} {
		d.cmd.Process.Signal(syscall.SIGTERM)
		<-d.done
	}
	by := map[string][]string{}
	for who, d := range map[string]*daemonProc{"a": a, "b": b} {
		for _, m := range created.FindAllStringSubmatch(d.output(), -1) {
			by[m[1]] = append(by[m[1]], who)
		}
	}
	for name, who := range by {
		if len(who) != 1 {
			t.Errorf("slot %s created %d times (by %v)", name, len(who), who)
		}
	}
	takers := map[string]bool{}
	for _, who := range by {
		takers[who[0]] = true
	}
	// The registry has every slot name created, live or rotated away, and
	// no other slot checkpoint.
	out, errs, code := retain(t, "checkpoint", "list", db, "--json")
	if code != 0 {
		t.Fatalf("list: %d %s", code, errs)
	}
	var list struct {
		Checkpoints []checkpoint.Info `json:"checkpoints"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("list: %v %s", err, out)
	}
	for _, in := range list.Checkpoints {
		if strings.HasPrefix(in.Name, "slot/") && len(by[in.Name]) != 1 {
			t.Errorf("live %s was not logged as created exactly once", in.Name)
		}
	}
	if len(list.Checkpoints) == 0 || len(list.Checkpoints) > 4 {
		t.Errorf("%d live slot checkpoints under keep last 3 (one may have come after the last rotation)", len(list.Checkpoints))
	}
	out, _, _ = retain(t, "audit", db, "--json")
	if !strings.Contains(out, "checkpoints_removed") {
		t.Errorf("no rotation audited:\n%s", out)
	}
	t.Logf("%d slots, taken by %v", len(by), takers)
}
