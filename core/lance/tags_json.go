package lance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The JSON of tag and branch files is read as strictly as Lance's serde
// does (verified against Lance 12 with hand-written files): the whole file
// must be UTF-8; exactly one object, whitespace after it only; a key may
// appear once; integers are unsigned decimal integers (no sign, fraction or
// exponent); a map must be an object of strings, never null; unknown keys
// are skipped. Where serde is more lenient (a top-level array for a struct,
// "-0", chrono's relaxed date forms beyond those below) this reader refuses:
// a ref it cannot read makes cleanup refuse, never guess.

// readObject walks the single top-level object of body and hands each
// key's raw value to field. Unknown keys must be skipped by field.
func readObject(body []byte, field func(key string, raw json.RawMessage) error) error {
	if !utf8.Valid(body) {
		return errors.New("not UTF-8")
	}
	if err := checkSurrogates(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("not JSON: %v", err)
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("not JSON: object key %v", tok)
		}
		if seen[key] {
			return fmt.Errorf("duplicate key %q", key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("not JSON: value of %q: %v", key, err)
		}
		if err := field(key, raw); err != nil {
			return fmt.Errorf("%q: %v", key, err)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return fmt.Errorf("not JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("trailing data after the object")
	}
	return nil
}

// checkSurrogates refuses a \u escape of an unpaired UTF-16 surrogate,
// which serde_json refuses and Go's decoder would turn into U+FFFD.
func checkSurrogates(body []byte) error {
	inString := false
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !inString {
			inString = c == '"'
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 < len(body) && body[i+1] == 'u' {
				r, ok := hex4(body, i+2)
				switch {
				case !ok:
					return nil // a bad escape: the decoder reports it
				case 0xdc00 <= r && r <= 0xdfff:
					return fmt.Errorf("unpaired surrogate \\u%04x in a string", r)
				case 0xd800 <= r && r <= 0xdbff:
					lo, ok := hex4(body, i+8)
					if i+7 >= len(body) || body[i+6] != '\\' || body[i+7] != 'u' || !ok || lo < 0xdc00 || lo > 0xdfff {
						return fmt.Errorf("unpaired surrogate \\u%04x in a string", r)
					}
					i += 6
				}
				i += 5
				continue
			}
			i++ // skip the escaped character
		}
	}
	return nil
}

func hex4(b []byte, at int) (rune, bool) {
	if at < 0 || at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		v, ok := unhex(c)
		if !ok {
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	return r, true
}

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

// rawUint reads an unsigned decimal integer, as serde reads u64/usize.
func rawUint(raw json.RawMessage) (uint64, error) {
	s := string(raw)
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("want an unsigned integer, got %.40s", s)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want an unsigned 64-bit integer, got %.40s", s)
	}
	return n, nil
}

// rawOptString reads a string or null.
func rawOptString(raw json.RawMessage) (string, bool, error) {
	if isNull(raw) {
		return "", false, nil
	}
	if len(raw) == 0 || raw[0] != '"' {
		return "", false, fmt.Errorf("want a string or null, got %.40s", raw)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false, err
	}
	return s, true, nil
}

// rawStringMap reads an object of strings (never null, as serde's
// HashMap<String, String> without Option).
func rawStringMap(raw json.RawMessage) (map[string]string, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, fmt.Errorf("want an object of strings, got %.40s", raw)
	}
	m := map[string]string{}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("want an object of strings: %v", err)
	}
	return m, nil
}

// rawOptTime reads an RFC 3339 timestamp or null. Accepted: what chrono
// writes and the variants Lance was seen to accept — 't' or ' ' for 'T',
// 'z' for 'Z', any fraction length, a numeric offset.
func rawOptTime(raw json.RawMessage) (time.Time, error) {
	s, ok, err := rawOptString(raw)
	if err != nil || !ok {
		return time.Time{}, err
	}
	t, perr := parseLanceTime(s)
	if perr != nil {
		return time.Time{}, fmt.Errorf("not an RFC 3339 timestamp: %.60q", s)
	}
	return t, nil
}

func parseLanceTime(s string) (time.Time, error) {
	b := []byte(s)
	if len(b) > 10 && (b[10] == 't' || b[10] == ' ') {
		b[10] = 'T'
	}
	if n := len(b); n > 0 && b[n-1] == 'z' {
		b[n-1] = 'Z'
	}
	return time.Parse(time.RFC3339Nano, string(b))
}

// lanceTime formats t as chrono serialises a DateTime<Utc> (RFC 3339,
// SecondsFormat::AutoSi, 'Z'): no fraction, or 3, 6 or 9 digits, whichever
// is exact.
func lanceTime(t time.Time) string {
	t = t.UTC()
	s := t.Format("2006-01-02T15:04:05")
	switch ns := t.Nanosecond(); {
	case ns == 0:
	case ns%1_000_000 == 0:
		s += fmt.Sprintf(".%03d", ns/1_000_000)
	case ns%1_000 == 0:
		s += fmt.Sprintf(".%06d", ns/1_000)
	default:
		s += fmt.Sprintf(".%09d", ns)
	}
	return s + "Z"
}

// jsonString quotes s as serde_json does: only '"', '\\' and control
// characters are escaped (\b \t \n \f \r, others \u00xx in lower-case hex);
// '/', '<', '>', '&', U+2028 and non-ASCII are written as they are.
func jsonString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if c < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&15])
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
}

// prettyMap writes a string map as serde_json's pretty printer does at
// nesting depth 1 (keys sorted: Lance's HashMap order is arbitrary).
func prettyMap(b *strings.Builder, m map[string]string) {
	if len(m) == 0 {
		b.WriteString("{}")
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b.WriteString("{\n")
	for i, k := range keys {
		b.WriteString("    ")
		jsonString(b, k)
		b.WriteString(": ")
		jsonString(b, m[k])
		if i < len(keys)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("  }")
}

// encodeTag writes the tag file exactly as Lance 12 writes it
// (serde_json::to_string_pretty of TagContents: two-space indent, keys in
// declaration order, no trailing newline).
func encodeTag(t Tag) []byte {
	var b strings.Builder
	b.WriteString("{\n  \"branch\": ")
	if t.Branch == "" {
		b.WriteString("null")
	} else {
		jsonString(&b, t.Branch)
	}
	fmt.Fprintf(&b, ",\n  \"version\": %d,\n  \"createdAt\": ", t.Version)
	writeOptTime(&b, t.CreatedAt)
	b.WriteString(",\n  \"updatedAt\": ")
	writeOptTime(&b, t.UpdatedAt)
	fmt.Fprintf(&b, ",\n  \"manifestSize\": %d,\n  \"metadata\": ", t.ManifestSize)
	prettyMap(&b, t.Metadata)
	b.WriteString("\n}")
	return []byte(b.String())
}

func writeOptTime(b *strings.Builder, t time.Time) {
	if t.IsZero() {
		b.WriteString("null")
		return
	}
	jsonString(b, lanceTime(t))
}

// parseTag reads a tag file's body. name and info are filled in by the
// caller. Required: version, manifestSize. Optional: branch (null or "main"
// for main, else a valid branch name), createdAt, updatedAt (RFC 3339 or
// null), metadata (an object of strings). Unknown keys are tolerated (as
// Lance does) and remembered, so that no rewrite drops them.
func parseTag(body []byte) (Tag, error) {
	var t Tag
	var haveVersion, haveSize bool
	err := readObject(body, func(key string, raw json.RawMessage) error {
		var err error
		switch key {
		case "branch":
			var ok bool
			t.Branch, ok, err = rawOptString(raw)
			if err == nil && ok {
				t.Branch, err = refBranch(t.Branch)
			}
		case "version":
			t.Version, err = rawUint(raw)
			haveVersion = true
		case "manifestSize":
			t.ManifestSize, err = rawUint(raw)
			haveSize = true
		case "createdAt":
			t.CreatedAt, err = rawOptTime(raw)
		case "updatedAt":
			t.UpdatedAt, err = rawOptTime(raw)
		case "metadata":
			t.Metadata, err = rawStringMap(raw)
		default:
			t.unknown = append(t.unknown, key)
		}
		return err
	})
	switch {
	case err != nil:
		return Tag{}, err
	case !haveVersion:
		return Tag{}, errors.New(`missing "version"`)
	case !haveSize:
		return Tag{}, errors.New(`missing "manifestSize"`)
	}
	return t, nil
}

// refBranch normalises the branch a ref names: Lance 12 resolves "main" to
// the main branch (a tag with "branch": "main" checks out main's version),
// so it is "" here like null; anything else must be a valid branch name,
// or Lance could not check the ref out.
func refBranch(b string) (string, error) {
	if b == "main" {
		return "", nil
	}
	if err := ValidateBranchName(b); err != nil {
		return "", err
	}
	return b, nil
}

// parseBranch reads a branch file's body. Required (as Lance 12 requires
// them): parentVersion, createAt (Unix seconds), manifestSize. Optional:
// parentBranch (null or "main" for main), identifier (an object whose
// version_mapping is a list of [version, id] pairs), metadata.
func parseBranch(body []byte) (Branch, error) {
	var b Branch
	var haveParent, haveCreate, haveSize bool
	err := readObject(body, func(key string, raw json.RawMessage) error {
		var err error
		switch key {
		case "parentBranch":
			var ok bool
			b.ParentBranch, ok, err = rawOptString(raw)
			if err == nil && ok {
				b.ParentBranch, err = refBranch(b.ParentBranch)
			}
		case "identifier":
			b.Lineage, err = parseIdentifier(raw)
		case "parentVersion":
			b.ParentVersion, err = rawUint(raw)
			haveParent = true
		case "createAt":
			var s uint64
			if s, err = rawUint(raw); err == nil {
				if s > 1<<40 { // beyond year 36000: not a time anyone wrote
					return fmt.Errorf("%d is not a plausible Unix time in seconds", s)
				}
				b.CreatedAt = time.Unix(int64(s), 0).UTC()
			}
			haveCreate = true
		case "manifestSize":
			b.ManifestSize, err = rawUint(raw)
			haveSize = true
		case "metadata":
			b.Metadata, err = rawStringMap(raw)
		}
		return err
	})
	switch {
	case err != nil:
		return Branch{}, err
	case !haveParent:
		return Branch{}, errors.New(`missing "parentVersion"`)
	case !haveCreate:
		return Branch{}, errors.New(`missing "createAt"`)
	case !haveSize:
		return Branch{}, errors.New(`missing "manifestSize"`)
	}
	return b, nil
}

// parseIdentifier reads {"version_mapping": [[version, "id"], ...]}; other
// keys are ignored, version_mapping is required (as Lance requires it).
func parseIdentifier(raw json.RawMessage) ([]BranchFork, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, fmt.Errorf("want an object, got %.40s", raw)
	}
	var out []BranchFork
	have := false
	err := readObject(raw, func(key string, raw json.RawMessage) error {
		if key != "version_mapping" {
			return nil
		}
		have = true
		if len(raw) == 0 || raw[0] != '[' {
			return fmt.Errorf("want a list, got %.40s", raw)
		}
		var pairs []json.RawMessage
		if err := json.Unmarshal(raw, &pairs); err != nil {
			return err
		}
		out = make([]BranchFork, 0, len(pairs))
		for i, p := range pairs {
			var pair []json.RawMessage
			if len(p) == 0 || p[0] != '[' {
				return fmt.Errorf("entry %d: want [version, id], got %.40s", i, p)
			}
			if err := json.Unmarshal(p, &pair); err != nil {
				return fmt.Errorf("entry %d: %v", i, err)
			}
			if len(pair) != 2 {
				return fmt.Errorf("entry %d: want [version, id], got %d elements", i, len(pair))
			}
			v, err := rawUint(pair[0])
			if err != nil {
				return fmt.Errorf("entry %d: version: %v", i, err)
			}
			id, ok, err := rawOptString(pair[1])
			if err != nil || !ok {
				return fmt.Errorf("entry %d: id: want a string, got %.40s", i, pair[1])
			}
			out = append(out, BranchFork{Version: v, ID: id})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !have {
		return nil, errors.New(`missing "version_mapping"`)
	}
	return out, nil
}
