package lance

import (
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/storage"
)

// trickyRefNames are judged both by the validators and by real Lance
// (TestNamesAgreeWithLance). They include Lance's own test vectors from
// refs.rs and the Unicode classes where Rust's char::is_alphanumeric and a
// naive letter/digit test differ.
var trickyRefNames = []string{
	// Lance's check_valid_tag tests
	"ref", "ref-with-dashes", "ref.extension", "ref_with_underscores", "v1.2.3-rc4",
	"../ref", ".ref", "/ref", "@", "deeply/nested/ref", "nested//ref", "nested/ref", `nested\ref`,
	"ref*", "ref.lock", "ref/", "ref?", "ref@{ref", "ref[", "ref^", "~/ref", "ref.", "ref..ref",
	// Lance's check_valid_branch tests
	"feature/login", "bugfix/issue-123", "release/v1.2.3", "user/someone/my-feature", "with.dot",
	"/start-with-slash", "end-with-slash/", "have//consecutive-slash", "have..dot-dot", `have\backslash`,
	"name.lock", "bad@character", "bad segment",
	// edges
	"1", "-a", "_a", "a-", "a.lock.x", "A.LOCK", "a/.lock", "a/b.lock", "ok/a.lock.b",
	"main", "Main", "MAIN", "main2", "feat/main", "x/main", "main/x",
	".a", "a.", "a/.b", "a/b.", "a/./b", "a/../b", "./a", "a/.", ".", "..", "a..b",
	"a b", "a\tb", "a%b", "a+b", "a:b", "a~b", "tree", "_refs", "a-/-b",
	// Unicode: letters, numbers of every category, Other_Alphabetic marks
	"ünï", "日本", "٣", "Ⅻ", "²", "ª", "ʰ", "กั", "Ⓐ", "x\u0345", "𝟘",
	// refused: a plain combining mark, a zero-width space, a symbol
	"e\u0301", "a\u200bb", "a€b", "x/ü/y",
}

func TestValidateTagName(t *testing.T) {
	ok := []string{"ref", "ref-with-dashes", "ref.extension", "ref_with_underscores", "v1.2.3-rc4",
		"1", "-a", "_a", "a-", "a.lock.x", "A.LOCK", "main", "Main", "tree", "ünï", "日本", "Ⅻ", "²", "x\u0345", "Ⓐ"}
	bad := map[string]string{
		"":           "must not be empty",
		"../ref":     "character '/'",
		".ref":       "must not begin with '.'",
		"ref.":       "must not end with '.'",
		"ref.lock":   `must not end with ".lock"`,
		"ref..ref":   `must not contain ".."`,
		"a/b":        "character '/' at byte 1",
		`a\b`:        `character '\\'`,
		"a b":        "character ' '",
		"a\x00b":     "character U+0000",
		"a\xffb":     "invalid UTF-8 byte 0xff",
		"e\u0301":    "U+0301",
		"a\u200bb":   "U+200B",
		"..":         "must not begin with '.'",
		".":          "must not begin with '.'",
		"ref@{ref":   "character '@'",
		"a\u2028b":   "U+2028",
		"ref.lock.x": "", // valid: only a final .lock is refused
	}
	for _, n := range ok {
		if err := ValidateTagName(n); err != nil {
			t.Errorf("ValidateTagName(%q) = %v, want nil", n, err)
		}
	}
	for n, rule := range bad {
		err := ValidateTagName(n)
		if rule == "" {
			if err != nil {
				t.Errorf("ValidateTagName(%q) = %v, want nil", n, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), rule) {
			t.Errorf("ValidateTagName(%q) = %v, want the rule %q", n, err, rule)
			continue
		}
		if !errors.Is(err, ErrInvalidName) || !errors.Is(err, storage.ErrInvalidArgument) {
			t.Errorf("ValidateTagName(%q): %v is not ErrInvalidName and core.ErrInvalidArgument", n, err)
		}
		var ne *NameError
		if !errors.As(err, &ne) || ne.Ref != "tag" || ne.Name != n {
			t.Errorf("ValidateTagName(%q): %#v", n, err)
		}
	}
}

func TestValidateBranchName(t *testing.T) {
	ok := []string{"feature/login", "bugfix/issue-123", "release/v1.2.3", "user/someone/my-feature", "normal",
		"with-dash", "with_underscore", "with.dot", ".a", "a.", "a/.b", "a/b.", "Main", "MAIN", "main/x", "x/main",
		"a.lock/b", "tree", "ünï", "x/ü/y", "Ⓐ"}
	bad := map[string]string{
		"":                        "must not be empty",
		"/start-with-slash":       "must not begin or end with '/'",
		"end-with-slash/":         "must not begin or end with '/'",
		"have//consecutive-slash": "empty segment",
		"have..dot-dot":           `must not contain ".."`,
		`have\backslash`:          `must not contain '\'`,
		"name.lock":               `must not end with ".lock"`,
		"a/.lock":                 `must not end with ".lock"`,
		"bad@character":           "character '@' in segment \"bad@character\"",
		"bad segment":             "character ' '",
		"main":                    "main branch",
		"a/./b":                   `"." segment`,
		".":                       `"." segment`,
		"..":                      `must not contain ".."`,
		"a\tb":                    "U+0009",
		"e\u0301":                 "U+0301",
	}
	for _, n := range ok {
		if err := ValidateBranchName(n); err != nil {
			t.Errorf("ValidateBranchName(%q) = %v, want nil", n, err)
		}
	}
	for n, rule := range bad {
		err := ValidateBranchName(n)
		if err == nil || !strings.Contains(err.Error(), rule) {
			t.Errorf("ValidateBranchName(%q) = %v, want the rule %q", n, err, rule)
			continue
		}
		if !errors.Is(err, ErrInvalidName) || !errors.Is(err, storage.ErrInvalidArgument) {
			t.Errorf("ValidateBranchName(%q): %v is not typed", n, err)
		}
	}
}

func TestPathPartEncoding(t *testing.T) {
	for in, want := range map[string]string{
		"a/b":       "a%2Fb",
		"feat/x/y":  "feat%2Fx%2Fy",
		"ünï":       "%C3%BCn%C3%AF",
		".":         "%2E",
		"..":        "%2E%2E",
		"a.b-c_d":   "a.b-c_d",
		"a%b":       "a%25b",
		"q?*<>|#\"": "q%3F%2A%3C%3E%7C%23%22",
		"sp ace":    "sp ace", // not in Lance's set
		"\x7f\x01":  "%7F%01",
	} {
		if got := pathPartEncode(in); got != want {
			t.Errorf("pathPartEncode(%q) = %q, want %q", in, got, want)
		}
		if in == "." || in == ".." {
			continue
		}
		if back, ok := pathPartDecode(want); !ok || back != in {
			t.Errorf("pathPartDecode(%q) = %q, %v, want %q", want, back, ok, in)
		}
	}
	for _, bad := range []string{"%", "%2", "%zz", "a%2", "%C3"} {
		if got, ok := pathPartDecode(bad); ok {
			t.Errorf("pathPartDecode(%q) = %q, accepted", bad, got)
		}
	}
}

// Lance accepts non-ASCII tag names but cannot list them back; retain
// refuses to write one, naming the reason.
func TestTagFileNameRefusesWhatLanceCannotList(t *testing.T) {
	if _, err := tagFileName("ünï"); !errors.Is(err, ErrInvalidName) || !strings.Contains(err.Error(), "%C3%BCn%C3%AF.json") {
		t.Fatalf("tagFileName(ünï) = %v", err)
	}
	if f, err := tagFileName("v1.2"); err != nil || f != "v1.2.json" {
		t.Fatalf("tagFileName(v1.2) = %q, %v", f, err)
	}
	if f, err := branchFileName("feat/ü"); err != nil || f != "feat%2F%C3%BC.json" {
		t.Fatalf("branchFileName = %q, %v", f, err)
	}
	for file, want := range map[string]string{
		"feat%2Fx.json": "",
		"feat%2fx.json": "would look for branch",
		"feat%2Fx":      "not a .json file",
		"a%2F%2Fb.json": "empty segment",
		"%zz.json":      "not a valid percent-encoding",
		"ünï.json":      "would look for branch",
		"main.json":     "main branch",
	} {
		_, reason := branchNameFromFile(file)
		if want == "" && reason != "" || want != "" && !strings.Contains(reason, want) {
			t.Errorf("branchNameFromFile(%q) reason %q, want %q", file, reason, want)
		}
	}
	for file, want := range map[string]string{
		"v1.json":            "",
		"%C3%BCn%C3%AF.json": "character '%'",
		"ünï.json":           "would read tag",
		".json":              "must not be empty",
		"sp ace.json":        "character ' '",
	} {
		_, reason := tagNameFromFile(file)
		if want == "" && reason != "" || want != "" && !strings.Contains(reason, want) {
			t.Errorf("tagNameFromFile(%q) reason %q, want %q", file, reason, want)
		}
	}
}

// Real Lance's tags.create and branches.create accept exactly the names the
// validators accept.
func TestNamesAgreeWithLance(t *testing.T) {
	dir := t.TempDir()
	res := refsRun(t, dir,
		refOp{"op": "create", "rows": 1},
		refOp{"op": "tryTagNames", "names": trickyRefNames},
		refOp{"op": "tryBranchNames", "names": trickyRefNames},
	)
	tags := refDecode[map[string]string](t, res[1])
	branches := refDecode[map[string]string](t, res[2])
	var accepted []string
	for _, n := range trickyRefNames {
		lanceErr, ok := tags[n]
		if !ok {
			t.Fatalf("no Lance verdict for tag %q", n)
		}
		if err := ValidateTagName(n); (err == nil) != (lanceErr == "") {
			t.Errorf("tag %q: retain says %v, Lance says %q", n, err, lanceErr)
		}
		lanceErr = branches[n]
		if err := ValidateBranchName(n); (err == nil) != (lanceErr == "") {
			t.Errorf("branch %q: retain says %v, Lance says %q", n, err, lanceErr)
		}
		if lanceErr == "" {
			accepted = append(accepted, n)
		}
	}
	sort.Strings(accepted)
	t.Logf("%d names judged; branches Lance accepted: %q", len(trickyRefNames), accepted)
}
