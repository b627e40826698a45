package daemon

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/retain-dev/retain/core/duration"
	"github.com/retain-dev/retain/core/storage"
)

// ConfigError is a refused daemon config, at the file and line to fix
// ("daemon.yaml:12: unknown key ..."). It is a storage.ErrInvalidArgument.
type ConfigError struct {
	File string
	Line int // 0: the file as a whole
	Msg  string
}

func (e *ConfigError) Error() string {
	pos := e.File
	if e.Line > 0 {
		pos += ":" + strconv.Itoa(e.Line)
	}
	if pos == "" {
		return "daemon config: " + e.Msg
	}
	return pos + ": " + e.Msg
}

func (e *ConfigError) Unwrap() error { return storage.ErrInvalidArgument }

// configKeys are the keys of each mapping of the config, by path ("" the
// top level); a key not here is refused, naming the nearest one.
var configKeys = map[string][]string{
	"":                     {"enabled", "interval", "retention", "actor", "parallelism", "max_rps", "stores", "discover", "concurrency", "checkpoints", "expiry_margin"},
	"retention":            {"older_than", "keep_last", "every", "writers_stopped", "tables", "branches"},
	"retention.tables[]":   {"older_than", "keep_last"},
	"retention.branches[]": {"older_than", "keep_last"},
	"checkpoints[]":        {"name", "every", "offset", "branch", "keep"},
	"checkpoints[].keep":   {"last", "hourly", "daily", "weekly", "monthly", "yearly", "within", "within_hourly", "within_daily", "within_weekly", "within_monthly", "within_yearly"},
}

// listIndex matches the index of a list entry in a key path.
var listIndex = regexp.MustCompile(`\[\d+\]`)

// schemaPath is the configKeys entry of path: "checkpoints[2].keep" is
// "checkpoints[].keep".
func schemaPath(path string) string { return listIndex.ReplaceAllString(path, "[]") }

// yamlLine finds the line in a yaml syntax error ("yaml: line 3: ...").
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// ParseConfig parses the YAML (or JSON) config b read from file. It walks
// the document's nodes rather than decoding it whole so that each refusal
// names the line of the key or value at fault.
func ParseConfig(file string, b []byte) (Config, error) {
	var c Config
	at := func(line int, format string, args ...any) error {
		return &ConfigError{File: file, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		line := 0
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			line, _ = strconv.Atoi(m[1])
			msg = m[2]
		}
		return c, at(line, "the config does not parse: %s (see docs/daemon.md)", msg)
	}
	lines := map[string]int{}
	if len(doc.Content) == 0 {
		return c, c.validate(func(string) (string, int) { return file, 0 })
	}
	top := doc.Content[0]
	if top.Kind == yaml.ScalarNode && top.Tag == "!!null" {
		return c, c.validate(func(string) (string, int) { return file, 0 })
	}
	err := walkMapping(top, "", lines, at, func(path string, k, v *yaml.Node) error {
		switch path {
		case "enabled":
			b, err := boolValue(path, v, at)
			c.Enabled = b
			return err
		case "interval":
			return durationValue(path, v, at, &c.Interval)
		case "actor":
			s, err := stringValue(path, v, at)
			c.Actor = s
			return err
		case "parallelism":
			return intValue(path, v, at, &c.Parallelism)
		case "max_rps":
			return floatValue(path, v, at, &c.MaxRPS)
		case "concurrency":
			return intValue(path, v, at, &c.Concurrency)
		case "stores":
			l, err := stringList(path, v, at)
			c.Stores = l
			return err
		case "discover":
			l, err := stringList(path, v, at)
			c.Discover = l
			return err
		case "checkpoints":
			return scheduleList(v, lines, at, &c.Checkpoints)
		case "expiry_margin":
			return durationValue(path, v, at, &c.ExpiryMargin)
		case "retention":
			return walkMapping(v, "retention", lines, at, func(path string, k, v *yaml.Node) error {
				switch path {
				case "retention.older_than":
					return durationValue(path, v, at, &c.Retention.OlderThan)
				case "retention.every":
					return durationValue(path, v, at, &c.Retention.Every)
				case "retention.keep_last":
					return intValue(path, v, at, &c.Retention.KeepLast)
				case "retention.tables":
					return ruleMap(path, v, lines, at, &c.Retention.Tables)
				case "retention.branches":
					return ruleMap(path, v, lines, at, &c.Retention.Branches)
				case "retention.writers_stopped":
					b, err := boolValue(path, v, at)
					if b != nil {
						c.Retention.WritersStopped = *b
					}
					return err
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return c, err
	}
	return c, c.validate(func(key string) (string, int) {
		// A key not written (a schedule without every) is at its parent.
		for {
			if l, ok := lines[key]; ok {
				return file, l
			}
			i := strings.LastIndexByte(key, '.')
			if i < 0 {
				return file, 0
			}
			key = key[:i]
		}
	})
}

// walkMapping calls each for every key of the mapping n (at path), after
// refusing a key it does not know or a key written twice; lines gets the
// line of every key.
func walkMapping(n *yaml.Node, path string, lines map[string]int, at func(int, string, ...any) error, each func(path string, k, v *yaml.Node) error) error {
	known := configKeys[schemaPath(path)]
	where := "the config"
	if path != "" {
		where = fmt.Sprintf("%q", path)
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil // "retention:" with nothing under it
	}
	if n.Kind != yaml.MappingNode {
		return at(n.Line, "%s must be a mapping of keys (%s), not %s", where, strings.Join(known, ", "), nodeKind(n))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		full := k.Value
		if path != "" {
			full = path + "." + k.Value
		}
		if path == "" && k.Value == "identity" {
			// Replicas share the file; two processes under one identity
			// would each take the other's claim for its own.
			return at(k.Line, "unknown key %q: a replica names itself with --identity NAME (replicas share this file); remove the key", k.Value)
		}
		if !contains(known, k.Value) {
			return at(k.Line, "%s", unknownKey(path, k.Value))
		}
		if first, ok := lines[full]; ok {
			return at(k.Line, "key %q again (first on line %d): write each key once", k.Value, first)
		}
		lines[full] = k.Line
		if err := each(full, k, v); err != nil {
			return err
		}
	}
	return nil
}

// unknownKey says what is wrong with key under path: a likely misspelling
// of a key there, a key of another level, or the keys there are.
func unknownKey(path, key string) string {
	known := configKeys[schemaPath(path)]
	best, bestD := "", 0
	for _, k := range known {
		if d := editDistance(strings.ToLower(key), k); best == "" || d < bestD {
			best, bestD = k, d
		}
	}
	if bestD <= max(1, len(best)/3) {
		return fmt.Sprintf("unknown key %q (did you mean %q?)", key, best)
	}
	levels := make([]string, 0, len(configKeys))
	for p := range configKeys {
		levels = append(levels, p)
	}
	sort.Strings(levels)
	for _, p := range levels {
		if p != schemaPath(path) && contains(configKeys[p], key) {
			if p == "" {
				return fmt.Sprintf("key %q belongs at the top level, not under %q", key, path)
			}
			return fmt.Sprintf("key %q belongs under %q (indent it under \"%s:\")", key, p, p)
		}
	}
	where := "at the top level"
	if path != "" {
		where = fmt.Sprintf("under %q", path)
	}
	return fmt.Sprintf("unknown key %q: the keys %s are %s (docs/daemon.md)", key, where, strings.Join(known, ", "))
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias"
	}
	return fmt.Sprintf("the value %q", n.Value)
}

func isNull(v *yaml.Node) bool { return v.Kind == yaml.ScalarNode && v.Tag == "!!null" }

func boolValue(key string, v *yaml.Node, at func(int, string, ...any) error) (*bool, error) {
	if isNull(v) {
		return nil, nil
	}
	var b bool
	if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" || v.Decode(&b) != nil {
		return nil, at(v.Line, "%s must be true or false, not %s", key, nodeKind(v))
	}
	return &b, nil
}

func intValue(key string, v *yaml.Node, at func(int, string, ...any) error, out *int) error {
	if isNull(v) {
		return nil
	}
	if v.Kind != yaml.ScalarNode || v.Tag != "!!int" || v.Decode(out) != nil {
		return at(v.Line, "%s must be a whole number, not %s", key, nodeKind(v))
	}
	return nil
}

func floatValue(key string, v *yaml.Node, at func(int, string, ...any) error, out *float64) error {
	if isNull(v) {
		return nil
	}
	if v.Kind != yaml.ScalarNode || (v.Tag != "!!int" && v.Tag != "!!float") || v.Decode(out) != nil {
		return at(v.Line, "%s must be a number, not %s", key, nodeKind(v))
	}
	return nil
}

func durationValue(key string, v *yaml.Node, at func(int, string, ...any) error, out *Duration) error {
	if isNull(v) {
		return nil
	}
	if v.Kind != yaml.ScalarNode || v.Tag != "!!str" {
		return at(v.Line, "%s is a duration written as text, e.g. \"7d\", \"1w2d\" or \"36h\", not %s", key, nodeKind(v))
	}
	d, err := duration.Parse(v.Value)
	if err != nil {
		return at(v.Line, "%s: %v", key, err)
	}
	*out = Duration(d)
	return nil
}

func stringValue(key string, v *yaml.Node, at func(int, string, ...any) error) (string, error) {
	if isNull(v) {
		return "", nil
	}
	if v.Kind != yaml.ScalarNode {
		return "", at(v.Line, "%s must be text, not %s", key, nodeKind(v))
	}
	return v.Value, nil
}

// checkConfigActor is why actor cannot be recorded, or "". The bound is
// the checkpoint registry's (256 bytes).
func checkConfigActor(a string) string {
	switch {
	case a == "":
		return ""
	case strings.TrimSpace(a) == "":
		return "is blank: name who is acting, or leave actor out"
	case !utf8.ValidString(a):
		return "is not valid UTF-8"
	case len(a) > 256:
		return fmt.Sprintf("is %d bytes: at most 256", len(a))
	}
	for _, r := range a {
		if !unicode.IsPrint(r) {
			return fmt.Sprintf("has a non-printable character %U", r)
		}
	}
	return ""
}

func contains(l []string, s string) bool {
	for _, v := range l {
		if v == s {
			return true
		}
	}
	return false
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// stringList reads a list of text values (store URIs).
func stringList(key string, v *yaml.Node, at func(int, string, ...any) error) ([]string, error) {
	if isNull(v) {
		return nil, nil
	}
	if v.Kind != yaml.SequenceNode {
		return nil, at(v.Line, "%s must be a list of store URIs, not %s", key, nodeKind(v))
	}
	out := make([]string, 0, len(v.Content))
	for _, e := range v.Content {
		if e.Kind != yaml.ScalarNode || e.Tag != "!!str" || strings.TrimSpace(e.Value) == "" {
			return nil, at(e.Line, "every entry of %s must be a store URI written as text, not %s", key, nodeKind(e))
		}
		out = append(out, e.Value)
	}
	return out, nil
}

// scheduleList reads `checkpoints:`, a list of schedules.
// ruleMap reads a mapping of pattern to window ({"session/*": {older_than:
// 7d}}) in the order written: the first pattern that matches decides.
func ruleMap(path string, v *yaml.Node, lines map[string]int, at func(int, string, ...any) error, out *[]WindowRule) error {
	if isNull(v) {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		return at(v.Line, "%s must be a mapping of pattern to window ({\"session/*\": {older_than: 7d}}), not %s", path, nodeKind(v))
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, w := v.Content[i], v.Content[i+1]
		if first, ok := seen[k.Value]; ok {
			return at(k.Line, "%s: pattern %q again (first on line %d): write each pattern once", path, k.Value, first)
		}
		seen[k.Value] = k.Line
		r := WindowRule{Pattern: k.Value}
		at2 := fmt.Sprintf("%s[%d]", path, len(*out))
		lines[at2] = k.Line
		if !isNull(w) && w.Kind != yaml.MappingNode {
			return at(w.Line, "%s %q must be a mapping (older_than, keep_last), not %s", path, k.Value, nodeKind(w))
		}
		err := walkMapping(w, at2, lines, at, func(key string, k, v *yaml.Node) error {
			switch k.Value {
			case "older_than":
				return durationValue(key, v, at, &r.OlderThan)
			case "keep_last":
				return intValue(key, v, at, &r.KeepLast)
			}
			return nil
		})
		if err != nil {
			return err
		}
		*out = append(*out, r)
	}
	return nil
}

func scheduleList(v *yaml.Node, lines map[string]int, at func(int, string, ...any) error, out *[]Schedule) error {
	if isNull(v) {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		return at(v.Line, "checkpoints must be a list of schedules (- name: \"hourly/{{.Time}}\", every: 1h, keep: {...}), not %s", nodeKind(v))
	}
	for i, e := range v.Content {
		var s Schedule
		path := fmt.Sprintf("checkpoints[%d]", i)
		lines[path] = e.Line
		if e.Kind != yaml.MappingNode {
			return at(e.Line, "%s must be a mapping (name, every, offset, branch, keep), not %s", path, nodeKind(e))
		}
		err := walkMapping(e, path, lines, at, func(key string, k, v *yaml.Node) error {
			switch strings.TrimPrefix(key, path+".") {
			case "name":
				n, err := stringValue(key, v, at)
				s.Name = n
				return err
			case "branch":
				n, err := stringValue(key, v, at)
				s.Branch = n
				return err
			case "every":
				return durationValue(key, v, at, &s.Every)
			case "offset":
				return durationValue(key, v, at, &s.Offset)
			case "keep":
				return walkMapping(v, path+".keep", lines, at, func(key string, k, v *yaml.Node) error {
					kc := &s.Keep
					switch k.Value {
					case "last":
						return keepValue(key, v, at, &kc.Last)
					case "hourly":
						return keepValue(key, v, at, &kc.Hourly)
					case "daily":
						return keepValue(key, v, at, &kc.Daily)
					case "weekly":
						return keepValue(key, v, at, &kc.Weekly)
					case "monthly":
						return keepValue(key, v, at, &kc.Monthly)
					case "yearly":
						return keepValue(key, v, at, &kc.Yearly)
					case "within":
						return durationValue(key, v, at, &kc.Within)
					case "within_hourly":
						return durationValue(key, v, at, &kc.WithinHourly)
					case "within_daily":
						return durationValue(key, v, at, &kc.WithinDaily)
					case "within_weekly":
						return durationValue(key, v, at, &kc.WithinWeekly)
					case "within_monthly":
						return durationValue(key, v, at, &kc.WithinMonthly)
					case "within_yearly":
						return durationValue(key, v, at, &kc.WithinYearly)
					}
					return nil
				})
			}
			return nil
		})
		if err != nil {
			return err
		}
		*out = append(*out, s)
	}
	return nil
}

// keepValue reads a keep count: a whole number, or -1 / unlimited for
// every bucket.
func keepValue(key string, v *yaml.Node, at func(int, string, ...any) error, out *int) error {
	if v.Kind == yaml.ScalarNode && strings.EqualFold(v.Value, "unlimited") {
		*out = -1
		return nil
	}
	if err := intValue(key, v, at, out); err != nil {
		return at(v.Line, "%s must be a number of buckets, or -1 / unlimited for all, not %s", key, nodeKind(v))
	}
	if *out < -1 {
		return at(v.Line, "%s must be a number of buckets, or -1 / unlimited for all, not %d", key, *out)
	}
	return nil
}
