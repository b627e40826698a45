package conformance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/pluginproto"
)

// Config is the one configuration of a conformance run, shared by the Go
// library (RunTests, Run) and the CLI (`conformance run`), in the manner of
// csi-test's sanity package.
type Config struct {
	// Adapter is the name of one of Adapters ("localfs") or the path of a
	// vendor's adapter binary (anything containing a '/').
	Adapter string `json:"adapter"`
	// SHA256 is the hex digest the adapter binary must have; required with
	// a path.
	SHA256 string `json:"sha256,omitempty"`
	// Backend names what serves the store, for the report and the support
	// matrix ("versitygw v1.8.0", "AWS S3 eu-west-1"). Default: the scheme.
	Backend string `json:"backend,omitempty"`
	// Store is the store URI to test in. Empty means a fresh temporary
	// directory for file adapters and mem:// for the memory adapter.
	Store string `json:"store,omitempty"`
	// Processes is how many OS processes race in the cross-process cases
	// (default 4), each with its own plugin instance.
	Processes int `json:"processes"`
	// Rounds is how many rounds the race cases run. The default is what
	// catches an adapter that breaks 1 operation in 500 with 99 %
	// probability: PowerRounds(Processes), 767 with 4 processes.
	Rounds int `json:"rounds"`
	// Timeout bounds the whole run (default 15m).
	Timeout time.Duration `json:"timeout"`
	// Run selects cases by regular expression on their names.
	Run string `json:"run,omitempty"`
	// Skip names cases not to run, each with the reason the report gives
	// (a backend known to break the promise: say which, and since when).
	Skip map[string]string `json:"skip,omitempty"`
	// InProcess opens the adapter inside each process instead of as a
	// plugin: for testing an adapter package without the boundary.
	InProcess bool `json:"in_process,omitempty"`
	// ReportDir receives artefacts such as porcupine visualisations of a
	// non-linearizable history. Default: the working directory.
	ReportDir string `json:"report_dir,omitempty"`
	// Adapters are the adapters this binary carries (served as plugins of
	// itself through the hidden subcommand, or opened in-process).
	Adapters []storage.Adapter `json:"-"`
	// Logger receives plugin logs; nil discards them.
	Logger hclog.Logger `json:"-"`

	tempDir string
}

func (c *Config) setDefaults() {
	if c.Processes == 0 {
		c.Processes = 4
	}
	if c.Rounds == 0 {
		c.Rounds = PowerRounds(c.Processes)
	}
	if c.Timeout == 0 {
		c.Timeout = 15 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
}

// Power is the suite's statistical power: an adapter that breaks one
// racing operation in FailureRate is caught with at least Confidence
// probability in one run.
const (
	FailureRate = 500
	Confidence  = 0.99
)

// PowerRounds is the rounds the race cases need for Power with processes
// racing: each round has processes−1 operations that must be refused (the
// losers of a create, the stale deletes), and n of them catch a failure
// rate of 1/FailureRate with probability 1−(1−1/FailureRate)^n, so n ≥
// ln(1−Confidence)/ln(1−1/FailureRate) ≈ 2,300.
func PowerRounds(processes int) int {
	n := math.Log(1-Confidence) / math.Log(1-1.0/FailureRate)
	return int(math.Ceil(n / float64(max(1, processes-1))))
}

// isPath says whether Adapter names a binary rather than one of Adapters.
func (c *Config) isPath() bool { return strings.Contains(c.Adapter, "/") }

func (c *Config) carried(name string) (storage.Adapter, bool) {
	for _, a := range c.Adapters {
		if a.Name == name {
			return a, true
		}
	}
	return storage.Adapter{}, false
}

// validate checks the configuration and resolves the store location. Its
// errors are usage errors (storage.ErrInvalidArgument).
func (c *Config) validate() (storage.Location, *regexp.Regexp, error) {
	c.setDefaults()
	bad := func(format string, args ...any) (storage.Location, *regexp.Regexp, error) {
		return storage.Location{}, nil, storage.Errorf("conformance", "", storage.ErrInvalidArgument, format, args...)
	}
	if c.Adapter == "" {
		return bad("no adapter: give the name of one this binary carries (%s) or a binary path with --sha256", c.names())
	}
	if c.Processes < 2 || c.Rounds < 1 {
		return bad("processes must be at least 2 and rounds at least 1 (got %d, %d)", c.Processes, c.Rounds)
	}
	var re *regexp.Regexp
	if c.Run != "" {
		var err error
		if re, err = regexp.Compile(c.Run); err != nil {
			return bad("--run %q: %v", c.Run, err)
		}
	}
	for name, why := range c.Skip {
		known := false
		for _, k := range Cases() {
			known = known || k.Name == name
		}
		if !known {
			return bad("--skip %s: no case has that name (`conformance run` lists them)", name)
		}
		if strings.TrimSpace(why) == "" {
			return bad("--skip %s: give the reason, as %s=REASON: the report shows it", name, name)
		}
	}
	var schemes []string
	if c.isPath() {
		if c.InProcess {
			return bad("an adapter binary always runs out of process")
		}
		if c.SHA256 == "" {
			return bad("adapter binary %s needs --sha256 (sha256sum %s)", c.Adapter, c.Adapter)
		}
		if c.Store == "" {
			return bad("adapter binary %s needs --store: only file adapters this binary carries have a default store", c.Adapter)
		}
	} else {
		a, ok := c.carried(c.Adapter)
		if !ok {
			return bad("unknown adapter %q: this binary carries %s; a vendor binary is given by path", c.Adapter, c.names())
		}
		schemes = a.Schemes
	}
	if c.Store == "" {
		switch {
		case contains(schemes, "file"):
			dir, err := os.MkdirTemp("", "retain-conformance-")
			if err != nil {
				return storage.Location{}, nil, err
			}
			c.tempDir = dir
			c.Store = "file://" + dir
		case contains(schemes, "mem"):
			c.Store = "mem://conformance"
		default:
			return bad("adapter %s needs --store (one of %s)", c.Adapter, strings.Join(schemes, ", "))
		}
	}
	loc, err := storage.ParseLocation(c.Store)
	if err != nil {
		return storage.Location{}, nil, err
	}
	if len(schemes) > 0 && !contains(schemes, loc.Scheme) {
		return bad("adapter %s serves %s, not %s://", c.Adapter, strings.Join(schemes, ", "), loc.Scheme)
	}
	return loc, re, nil
}

func (c *Config) names() string {
	var n []string
	for _, a := range c.Adapters {
		n = append(n, a.Name)
	}
	return strings.Join(n, ", ")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Open starts one instance of the adapter on loc the way the suite's
// cases do: in process (InProcess), from a vendor's binary (a path, with
// SHA256), or as a plugin of this very binary, which must call Dispatch
// first in main or TestMain. Benchmarks use it to measure an adapter
// through the same boundary the suite proves.
func (c *Config) Open(ctx context.Context, loc storage.Location) (storage.Driver, error) {
	switch {
	case c.InProcess:
		a, _ := c.carried(c.Adapter)
		return a.Open(ctx, loc)
	case c.isPath():
		return pluginproto.Launch(ctx, pluginproto.LaunchConfig{
			Adapter: c.Adapter, Path: c.Adapter, SHA256: c.SHA256, Location: loc, Logger: c.Logger,
		})
	default:
		return launchSelf(ctx, c.Adapter, loc, c.Logger)
	}
}

// binaryDigest is the SHA-256 of the code that serves the adapter: the
// vendor's binary, or this executable for the adapters it carries.
func (c *Config) binaryDigest() (path, digest string) {
	path = c.Adapter
	if !c.isPath() {
		exe, err := os.Executable()
		if err != nil {
			return "", ""
		}
		path = exe
	}
	f, err := os.Open(path)
	if err != nil {
		return path, ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return path, ""
	}
	return path, hex.EncodeToString(h.Sum(nil))
}

func (c *Config) protocol() string {
	if c.InProcess {
		return "in-process"
	}
	return fmt.Sprintf("v%d", pluginproto.ProtocolVersion)
}

// fileName is the adapter's name fit for a file name.
func (c *Config) fileName() string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == ' ' {
			return '_'
		}
		return r
	}, filepath.Base(c.Adapter))
}
