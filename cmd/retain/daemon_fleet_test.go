package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/retain-dev/retain/cmd/retain/internal/quickstart"
	"github.com/retain-dev/retain/core/daemon"
	"github.com/retain-dev/retain/core/failpoint"
	"github.com/retain-dev/retain/core/retention"
	"github.com/retain-dev/retain/internal/emulator"
)

// TestFleetReplicasShareStores is the fleet's proof on an S3 emulator
// (versitygw): 20 stores under one prefix, discovered, kept by 3 daemon
// processes with distinct identities. Replica r1 is killed (SIGKILL) in
// the middle of its first store's cleanup, after the run published its gc
// boundaries and before it deleted anything; r0 and r2 then keep every
// other store and leave r1's alone (its claim names another identity, and
// nothing proves r1 dead to them); r1 restarted under its identity
// finishes it. Every store ends cleaned per its window, and each removed
// version is in exactly one "removed" audit line, written by the replica
// that held the claim.
func TestFleetReplicasShareStores(t *testing.T) {
	if testing.Short() {
		t.Skip("starts versitygw and 4 daemon processes")
	}
	e := emulator.Versitygw(t)
	env := emulator.IsolateAWS(t, e.Env())
	c := awss3.New(awss3.Options{Region: e.Region, BaseEndpoint: aws.String(e.Endpoint), UsePathStyle: true,
		Credentials: aws.NewCredentialsCache(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: e.AccessKey, SecretAccessKey: e.SecretKey}, nil
		}))})
	ctx := context.Background()
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("fleet")}); err != nil {
		t.Fatal(err)
	}
	f, err := quickstart.LoadFixture(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	var stores []string
	for i := range n {
		prefix := fmt.Sprintf("tenants/s%02d/", i)
		for _, cm := range f.Commits {
			for _, o := range cm.Files {
				if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("fleet"), Key: aws.String(prefix + o.Key), Body: bytes.NewReader(o.Body)}); err != nil {
					t.Fatal(err)
				}
			}
		}
		stores = append(stores, fmt.Sprintf("s3://fleet/tenants/s%02d", i))
	}
	// Something under the prefix that is not a store: discovery skips it.
	if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("fleet"), Key: aws.String("tenants/notes/readme.txt"), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	keys := func() map[string]bool {
		out := map[string]bool{}
		p := awss3.NewListObjectsV2Paginator(c, &awss3.ListObjectsV2Input{Bucket: aws.String("fleet"), Prefix: aws.String("tenants/")})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range page.Contents {
				out[*o.Key] = true
			}
		}
		return out
	}
	before := keys()
	dir := t.TempDir()
	writeCfg := func(name string, concurrency int) string {
		p := filepath.Join(dir, name)
		cfg := fmt.Sprintf("discover: [\"s3://fleet/tenants\"]\nconcurrency: %d\ninterval: 1h\nretention:\n  keep_last: 2\n  writers_stopped: true\n", concurrency)
		if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg, cfg1 := writeCfg("fleet.yaml", 4), writeCfg("r1.yaml", 1)

	// r1, one store at a time, pauses in its first store's cleanup; that
	// store is the first in r1's order.
	victim := daemon.Order("r1", stores)[0]
	hs := t.TempDir()
	r1 := startDaemon(t, append(env, failpoint.PauseEnv+"="+retention.FPRunAfterBoundary, failpoint.PauseDir+"="+hs),
		"daemon", "--config", cfg1, "--identity", "r1", "--metrics-addr", "")
	r1.waitPaused(t, hs, retention.FPRunAfterBoundary)
	r1.cmd.Process.Signal(syscall.SIGKILL)
	<-r1.done

	// r0 and r2, at once, one round each.
	var wg sync.WaitGroup
	logs := make([]string, 3)
	for _, id := range []int{0, 2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs, code := retainEnv(t, env, "daemon", "--config", cfg, "--identity", fmt.Sprintf("r%d", id), "--once", "--log-level", "info")
			logs[id] = errs
			// The victim's claim was held by r1: waiting for it is how
			// replicas share a store, not a failure.
			if code != 0 || !strings.Contains(errs, "the retention claim is held") {
				t.Errorf("r%d: exit %d, want 0 having found the victim's claim held:\n%s", id, code, errs)
			}
		}()
	}
	wg.Wait()
	for _, id := range []int{0, 2} {
		for _, line := range strings.Split(logs[id], "\n") {
			if strings.Contains(line, "store="+victim) && strings.Contains(line, "removed") {
				t.Errorf("r%d removed something from %s, whose claim r1 held: %s", id, victim, line)
			}
		}
	}

	// r1 again, same identity: it finishes its store.
	out, errs, code := retainEnv(t, env, "daemon", "--config", cfg1, "--identity", "r1", "--once", "--json", "--log-level", "info")
	if code != 0 {
		t.Fatalf("r1 restarted: exit %d\n%s\n%s", code, out, errs)
	}
	var round daemon.RoundReport
	if err := json.Unmarshal([]byte(out), &round); err != nil {
		t.Fatal(err)
	}
	finished := false
	for _, s := range round.Stores {
		if s.Store == victim && s.Pass != nil && s.Pass.Resumed != nil && s.Pass.RetentionCompleted {
			finished = true
		}
	}
	if !finished {
		t.Fatalf("r1 restarted did not resume and finish %s:\n%s", victim, out)
	}
	if len(round.Stores) != n {
		t.Fatalf("discovered %d stores, want %d", len(round.Stores), n)
	}

	// Every store cleaned per its window, every removed version in exactly
	// one audit line, the objects gone from each store exactly those the
	// lines count, and the victim's lines all r1's.
	after := keys()
	for i, s := range stores {
		gone := 0
		for k := range before {
			if !after[k] && strings.HasPrefix(k, fmt.Sprintf("tenants/s%02d/", i)) {
				gone++
			}
		}
		counted := 0
		out, errs, code := retainEnv(t, env, "audit", s, "--json")
		if code != 0 {
			t.Fatalf("audit %s: %d %s", s, code, errs)
		}
		var lines []retention.AuditRecord
		if err := json.Unmarshal([]byte(out), &lines); err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for _, l := range lines {
			if l.Event != retention.AuditRemoved || l.Table == "_retain/registry" {
				continue
			}
			if s == victim && l.Actor != "r1" {
				t.Errorf("%s: removed by %q, not r1 whose claim it was: %+v", s, l.Actor, l)
			}
			for _, v := range l.Versions {
				seen[l.Table+" "+v]++
			}
			counted += l.FilesRemoved
		}
		if gone == 0 || counted != gone {
			t.Errorf("%s: %d objects gone, the removed lines count %d", s, gone, counted)
		}
		var got []string
		for k, c := range seen {
			if c != 1 {
				t.Errorf("%s: %s in %d removed lines, want exactly 1", s, k, c)
			}
			got = append(got, k)
		}
		slices.Sort(got)
		var want []string
		for _, tb := range []string{"events.lance", "users.lance"} {
			for v := 1; v <= 4; v++ {
				want = append(want, fmt.Sprintf("%s main v%d", tb, v))
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: removed %v, want %v (keep_last 2 of v1-v6)", s, got, want)
		}
	}
}
