package conformance

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

// Result of one case.
type Result string

const (
	Pass Result = "pass"
	Fail Result = "fail"
	Skip Result = "skip"
)

// CaseResult is one row of the report.
type CaseResult struct {
	Name     string        `json:"name"`
	Result   Result        `json:"result"`
	Reason   string        `json:"reason,omitempty"`
	Duration time.Duration `json:"duration_ns"`
	// Op, P50, P99 and Samples describe the latency of the case's main
	// operation, where it has one.
	Op      string        `json:"op,omitempty"`
	P50     time.Duration `json:"p50_ns,omitempty"`
	P99     time.Duration `json:"p99_ns,omitempty"`
	Samples int           `json:"samples,omitempty"`
	Logs    []string      `json:"logs,omitempty"`
	// KnownBroken: the case did not run because the configuration says
	// the backend breaks its promise (Config.Skip); Reason says how.
	KnownBroken bool `json:"known_broken,omitempty"`
}

// Report is the outcome of a run.
type Report struct {
	Adapter       string                `json:"adapter"`
	AdapterBinary string                `json:"adapter_binary,omitempty"`
	AdapterSHA256 string                `json:"adapter_sha256,omitempty"`
	Protocol      string                `json:"protocol"`
	Backend       string                `json:"backend"`
	Store         string                `json:"store"`
	RunPrefix     string                `json:"run_prefix"`
	Processes     int                   `json:"processes"`
	Rounds        int                   `json:"rounds"`
	Capabilities  *storage.Capabilities `json:"capabilities,omitempty"`
	Started       time.Time             `json:"started"`
	Duration      time.Duration         `json:"duration_ns"`
	Cases         []CaseResult          `json:"cases"`
	Artifacts     []string              `json:"artifacts,omitempty"`
	// Unchecked names the promises (Promises) none of whose cases ran: a
	// run filtered with --run, or cases skipped.
	Unchecked []string `json:"unchecked,omitempty"`
}

// Failed reports whether any case failed.
func (r *Report) Failed() bool {
	for _, c := range r.Cases {
		if c.Result == Fail {
			return true
		}
	}
	return false
}

// Case returns the named case's result.
func (r *Report) Case(name string) (CaseResult, bool) {
	for _, c := range r.Cases {
		if c.Name == name {
			return c, true
		}
	}
	return CaseResult{}, false
}

// Counts returns how many cases passed, failed and were skipped.
func (r *Report) Counts() (pass, fail, skip int) {
	for _, c := range r.Cases {
		switch c.Result {
		case Pass:
			pass++
		case Fail:
			fail++
		case Skip:
			skip++
		}
	}
	return
}

func ms(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

// WriteTable prints the human report.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "adapter  %s (protocol %s)\n", r.Adapter, r.Protocol)
	if r.AdapterSHA256 != "" {
		fmt.Fprintf(w, "binary   %s sha256:%s\n", r.AdapterBinary, r.AdapterSHA256)
	}
	fmt.Fprintf(w, "store    %s on %s (run prefix %s)\n", r.Store, r.Backend, r.RunPrefix)
	if c := r.Capabilities; c != nil {
		fmt.Fprintf(w, "declares create-if-absent=%s replace-if-version=%s delete-if-version=%s", c.CreateIfAbsent, c.ReplaceIfVersion, c.DeleteIfVersion)
		for _, g := range c.Gates {
			fmt.Fprintf(w, " gate:%s(%s)", g.Name, g.Scope)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tRESULT\tP50\tP99\tREASON")
	for _, c := range r.Cases {
		reason := c.Reason
		if i := strings.IndexByte(reason, '\n'); i >= 0 {
			reason = reason[:i] + " …"
		}
		p50, p99 := ms(c.P50), ms(c.P99)
		if c.Op != "" && c.Samples > 0 {
			p50 += " " + c.Op
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Name, strings.ToUpper(string(c.Result)), p50, p99, reason)
	}
	tw.Flush()
	for _, c := range r.Cases {
		if c.KnownBroken {
			fmt.Fprintf(w, "\nknown broken on this backend, not run: %s (%s)\n", c.Name, c.Reason)
		}
	}
	if len(r.Unchecked) > 0 {
		fmt.Fprintf(w, "\nnot checked by this run: %s\n", strings.Join(r.Unchecked, ", "))
	}
	p, f, s := r.Counts()
	for _, a := range r.Artifacts {
		fmt.Fprintf(w, "artifact: %s\n", a)
	}
	fmt.Fprintf(w, "\n%d passed, %d failed, %d skipped in %s\n", p, f, s, r.Duration.Round(time.Millisecond))
	return nil
}

// WriteJSON writes the report as JSON to path.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

type junitSuite struct {
	XMLName  xml.Name    `xml:"testsuite"`
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     float64     `xml:"time,attr"`
	Props    []junitProp `xml:"properties>property"`
	Cases    []junitCase `xml:"testcase"`
}

type junitProp struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string    `xml:"name,attr"`
	Classname string    `xml:"classname,attr"`
	Time      float64   `xml:"time,attr"`
	Failure   *junitMsg `xml:"failure,omitempty"`
	Skipped   *junitMsg `xml:"skipped,omitempty"`
	SystemOut string    `xml:"system-out,omitempty"`
}

type junitMsg struct {
	Message string `xml:"message,attr"`
	Body    string `xml:",chardata"`
}

// WriteJUnit writes the report as JUnit XML to path.
func (r *Report) WriteJUnit(path string) error {
	p, f, s := r.Counts()
	js := junitSuite{Name: "conformance/" + r.Adapter, Tests: p + f + s, Failures: f, Skipped: s, Time: r.Duration.Seconds(),
		Props: []junitProp{{"adapter", r.Adapter}, {"adapter_sha256", r.AdapterSHA256}, {"protocol", r.Protocol}, {"store", r.Store}}}
	for _, c := range r.Cases {
		jc := junitCase{Name: c.Name, Classname: "conformance." + r.Adapter, Time: c.Duration.Seconds(), SystemOut: strings.Join(c.Logs, "\n")}
		switch c.Result {
		case Fail:
			jc.Failure = &junitMsg{Message: firstLine(c.Reason), Body: c.Reason}
		case Skip:
			jc.Skipped = &junitMsg{Message: c.Reason}
		}
		js.Cases = append(js.Cases, jc)
	}
	b, err := xml.MarshalIndent(js, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte(xml.Header), append(b, '\n')...), 0o644)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// LoadReport reads a JSON report written by WriteJSON.
func LoadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: not a conformance report: %v", path, err)
	}
	return &r, nil
}
