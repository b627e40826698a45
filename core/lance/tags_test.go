package lance

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

// A tag file as Lance 12 wrote it (bytes copied from a real dataset).
const lanceTagFile = "{\n  \"branch\": null,\n  \"version\": 2,\n  \"createdAt\": \"2026-11-30T16:06:37.296483849Z\",\n  \"updatedAt\": \"2026-11-30T16:06:37.296483849Z\",\n  \"manifestSize\": 425,\n  \"metadata\": {}\n}"

var tsRE = regexp.MustCompile(`"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3}|\.\d{6}|\.\d{9})?Z"`)

func TestEncodeTagExactly(t *testing.T) {
	at := time.Date(2026, 11, 30, 16, 6, 37, 296483849, time.UTC)
	got := string(encodeTag(Tag{Version: 2, ManifestSize: 425, CreatedAt: at, UpdatedAt: at}))
	if got != lanceTagFile {
		t.Fatalf("encodeTag:\n%s\nwant (as Lance wrote it):\n%s", got, lanceTagFile)
	}
	got = string(encodeTag(Tag{Branch: "feat/x", Version: 3, ManifestSize: 550, CreatedAt: at, UpdatedAt: at.Add(time.Second),
		Metadata: map[string]string{"z": "1", "a": "q\"\\\n\x01/<é"}}))
	want := "{\n  \"branch\": \"feat/x\",\n  \"version\": 3,\n  \"createdAt\": \"2026-11-30T16:06:37.296483849Z\",\n  \"updatedAt\": \"2026-11-30T16:06:38.296483849Z\",\n  \"manifestSize\": 550,\n  \"metadata\": {\n    \"a\": \"q\\\"\\\\\\n\\u0001/<é\",\n    \"z\": \"1\"\n  }\n}"
	if got != want {
		t.Fatalf("encodeTag:\n%s\nwant:\n%s", got, want)
	}
	back, err := parseTag([]byte(got))
	if err != nil || back.Branch != "feat/x" || back.Metadata["a"] != "q\"\\\n\x01/<é" || !back.UpdatedAt.Equal(at.Add(time.Second)) {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
}

// chrono writes 0, 3, 6 or 9 fraction digits, whichever is exact.
func TestLanceTime(t *testing.T) {
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	for ns, want := range map[int]string{
		0:         "2026-01-02T02:04:05Z",
		120000000: "2026-01-02T02:04:05.120Z",
		123000:    "2026-01-02T02:04:05.000123Z",
		123400:    "2026-01-02T02:04:05.000123400Z",
		123456789: "2026-01-02T02:04:05.123456789Z",
		1:         "2026-01-02T02:04:05.000000001Z",
	} {
		if got := lanceTime(base.Add(time.Duration(ns))); got != want {
			t.Errorf("lanceTime(+%dns) = %s, want %s", ns, got, want)
		}
	}
}

// tagVariants are tag file bodies with the verdict Lance 12's reader gives
// them (checked again against real Lance by TestTagParsingAgreesWithLance)
// and retain's, where retain is deliberately stricter (fail closed).
var tagVariants = []struct {
	name, body  string
	lance       bool   // Lance's tags.getVersion reads it
	retainNoWhy string // non-empty: retain refuses although Lance reads it, and why
}{
	{"lanceWritten", lanceTagFile, true, ""},
	{"minimal", `{"version":1,"manifestSize":373}`, true, ""},
	{"extra", `{"version":1,"manifestSize":373,"zzz":[1,{"a":null}]}`, true, ""},
	{"escapeKey", `{"\u0076ersion":1,"manifestSize":373}`, true, ""},
	{"branchMain", `{"branch":"main","version":1,"manifestSize":373}`, true, ""},
	{"branchFeat", `{"branch":"feat/x","version":1,"manifestSize":373}`, true, ""},
	{"createdNull", `{"version":1,"manifestSize":373,"createdAt":null}`, true, ""},
	{"createdOffset", `{"version":1,"manifestSize":373,"createdAt":"2026-01-01T00:00:00+02:00"}`, true, ""},
	{"createdNoFrac", `{"version":1,"manifestSize":373,"createdAt":"2026-01-01T00:00:00Z"}`, true, ""},
	{"createdLower", `{"version":1,"manifestSize":373,"createdAt":"2026-01-01t00:00:00z"}`, true, ""},
	{"createdSpace", `{"version":1,"manifestSize":373,"createdAt":"2026-01-01 00:00:00Z"}`, true, ""},
	{"metaStr", `{"version":1,"manifestSize":373,"metadata":{"a":"b"}}`, true, ""},
	{"surrogatePair", `{"version":1,"manifestSize":373,"metadata":{"a":"\ud83d\ude00"}}`, true, ""},
	{"trailingWs", "{\"version\":1,\"manifestSize\":373}\n\n", true, ""},
	{"versionMax", `{"version":18446744073709551615,"manifestSize":373}`, true, ""},
	{"sizeWrong", `{"version":1,"manifestSize":5}`, true, ""},
	{"noSize", `{"version":1}`, false, ""},
	{"noVersion", `{"manifestSize":373}`, false, ""},
	{"versionStr", `{"version":"1","manifestSize":373}`, false, ""},
	{"versionFloat", `{"version":1.0,"manifestSize":373}`, false, ""},
	{"versionExp", `{"version":1e0,"manifestSize":373}`, false, ""},
	{"versionNeg", `{"version":-1,"manifestSize":373}`, false, ""},
	{"versionMinusZero", `{"version":-0,"manifestSize":373}`, false, ""},
	{"versionTooBig", `{"version":18446744073709551616,"manifestSize":373}`, false, ""},
	{"versionNull", `{"version":null,"manifestSize":373}`, false, ""},
	{"sizeNeg", `{"version":1,"manifestSize":-1}`, false, ""},
	{"sizeNull", `{"version":1,"manifestSize":null}`, false, ""},
	{"branchNum", `{"branch":5,"version":1,"manifestSize":373}`, false, ""},
	{"createdBad", `{"version":1,"manifestSize":373,"createdAt":"yesterday"}`, false, ""},
	{"createdNum", `{"version":1,"manifestSize":373,"createdAt":5}`, false, ""},
	{"metaNum", `{"version":1,"manifestSize":373,"metadata":{"a":1}}`, false, ""},
	{"metaNull", `{"version":1,"manifestSize":373,"metadata":null}`, false, ""},
	{"metaLoneSurrogate", `{"version":1,"manifestSize":373,"metadata":{"a":"\ud800"}}`, false, ""},
	{"keyLoneSurrogate", `{"version":1,"manifestSize":373,"\udc00":1}`, false, ""},
	{"ctrlInString", "{\"version\":1,\"manifestSize\":373,\"metadata\":{\"a\":\"x\ty\"}}", false, ""},
	{"dupKey", `{"version":1,"version":2,"manifestSize":373}`, false, ""},
	{"trailing", `{"version":1,"manifestSize":373} x`, false, ""},
	{"twoObjects", `{"version":1,"manifestSize":373}{}`, false, ""},
	{"array", `[1,373]`, false, ""},
	{"empty", ``, false, ""},
	{"bom", "\ufeff{\"version\":1,\"manifestSize\":373}", false, ""},
	{"invalidUTF8", "{\"version\":1,\"manifestSize\":373,\"x\":\"\xff\"}", false, ""},
	{"caseKey", `{"Version":1,"manifestSize":373}`, false, ""},
	{"snakeKey", `{"version":1,"manifest_size":373}`, false, ""},
	// Lance reads these, but retain refuses: Lance cannot check out the
	// first two, and the timestamp forms are beyond what retain parses.
	{"branchEmpty", `{"branch":"","version":1,"manifestSize":373}`, true, "empty branch name"},
	{"branchBadName", `{"branch":"Ma in","version":1,"manifestSize":373}`, true, "invalid branch name"},
	{"createdLeap", `{"version":1,"manifestSize":373,"createdAt":"2016-12-31T23:59:60Z"}`, true, "leap second"},
	{"createdUTCWord", `{"version":1,"manifestSize":373,"createdAt":"2016-12-31T23:59:00 UTC"}`, true, "chrono's relaxed offset"},
}

func TestParseTagVariants(t *testing.T) {
	for _, v := range tagVariants {
		tag, err := parseTag([]byte(v.body))
		want := v.lance && v.retainNoWhy == ""
		if (err == nil) != want {
			t.Errorf("%s: parseTag = %+v, %v; want accepted=%v", v.name, tag, err, want)
		}
	}
	tag, err := parseTag([]byte(lanceTagFile))
	if err != nil || tag.Version != 2 || tag.ManifestSize != 425 || tag.Branch != "" || tag.Metadata == nil ||
		tag.CreatedAt.Format(time.RFC3339Nano) != "2026-11-30T16:06:37.296483849Z" {
		t.Fatalf("parseTag(Lance's file) = %+v, %v", tag, err)
	}
	tag, _ = parseTag([]byte(`{"branch":"main","version":4,"manifestSize":623}`))
	if tag.Branch != "" || tag.Version != 4 || !tag.CreatedAt.IsZero() {
		t.Fatalf("branch main is main: %+v", tag)
	}
}

// Real Lance reads exactly the tag files tagVariants says it reads.
func TestTagParsingAgreesWithLance(t *testing.T) {
	dir := t.TempDir()
	refsRun(t, dir, refOp{"op": "create", "rows": 1})
	ops := []refOp{}
	for _, v := range tagVariants {
		refWriteFile(t, filepath.Join(dir, "t.lance", "_refs", "tags", v.name+".json"), v.body)
		ops = append(ops, refOp{"op": "tagGet", "name": v.name, "try": true})
	}
	res := refsRun(t, dir, ops...)
	for i, v := range tagVariants {
		if lanceErr := refLanceError(t, res[i]); (lanceErr == "") != v.lance {
			t.Errorf("%s: Lance says %q, the table says Lance reads it: %v", v.name, lanceErr, v.lance)
		}
	}
}

func TestCreateReadDeleteTagMemory(t *testing.T) {
	s := refMemStore(t)
	d := refFakeDataset(t, s, "db/t.lance", 373, 425, 504)
	before := time.Now()
	tag, err := d.CreateTag(refCtx, "v2", 2, map[string]string{"checkpoint": "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if tag.Name != "v2" || tag.Version != 2 || tag.ManifestSize != 425 || tag.Branch != "" || tag.Info.Key != "db/t.lance/_refs/tags/v2.json" ||
		tag.CreatedAt.Before(before) || !tag.CreatedAt.Equal(tag.UpdatedAt) {
		t.Fatalf("CreateTag = %+v", tag)
	}
	body, _, err := s.ReadAll(refCtx, tag.Info.Key)
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"branch\": null,\n  \"version\": 2,\n  \"createdAt\": TS,\n  \"updatedAt\": TS,\n  \"manifestSize\": 425,\n  \"metadata\": {\n    \"checkpoint\": \"c1\"\n  }\n}"
	if got := tsRE.ReplaceAllString(string(body), "TS"); got != want {
		t.Fatalf("tag file:\n%s\nwant:\n%s", body, want)
	}
	got, err := d.ReadTag(refCtx, "v2")
	if err != nil || got.Version != 2 || got.ManifestSize != 425 || got.Metadata["checkpoint"] != "c1" || got.Info.Version != tag.Info.Version ||
		!got.CreatedAt.Equal(tag.CreatedAt) {
		t.Fatalf("ReadTag = %+v, %v", got, err)
	}

	// create-if-absent: a second create of the name fails and changes nothing.
	_, err = d.CreateTag(refCtx, "v2", 3, nil)
	refWantIs(t, "second create", err, ErrTagExists, storage.ErrAlreadyExists)
	if again, _ := d.ReadTag(refCtx, "v2"); again.Version != 2 || again.Info.Version != tag.Info.Version {
		t.Fatalf("the existing tag changed: %+v", again)
	}
	_, err = d.CreateTag(refCtx, "v9", 9, nil)
	refWantIs(t, "missing version", err, storage.ErrNotFound)
	if _, err := s.Stat(refCtx, "db/t.lance/_refs/tags/v9.json"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a tag of a missing version was written: %v", err)
	}
	for _, bad := range []string{"", "a/b", "../x", "x.lock", "ünï"} {
		_, err := d.CreateTag(refCtx, bad, 1, nil)
		refWantIs(t, "create "+bad, err, ErrInvalidName, storage.ErrInvalidArgument)
	}
	_, err = d.CreateTag(refCtx, "m", 1, map[string]string{"k": "\xff"})
	refWantIs(t, "non-UTF-8 metadata", err, storage.ErrInvalidArgument)

	// delete-if-version: a stale token is refused and the tag stays.
	stale := tag.Info.Version
	if _, err := s.PutBytes(refCtx, tag.Info.Key, encodeTag(Tag{Version: 3, ManifestSize: 504}), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	err = d.DeleteTag(refCtx, "v2", stale)
	refWantIs(t, "stale delete", err, ErrTagChanged, storage.ErrPreconditionFailed)
	cur, err := d.ReadTag(refCtx, "v2")
	if err != nil || cur.Version != 3 {
		t.Fatalf("the tag did not stay: %+v, %v", cur, err)
	}
	if err := d.DeleteTag(refCtx, "v2", cur.Info.Version); err != nil {
		t.Fatal(err)
	}
	_, err = d.ReadTag(refCtx, "v2")
	refWantIs(t, "read deleted", err, ErrTagNotFound, storage.ErrNotFound)
	refWantIs(t, "delete missing", d.DeleteTag(refCtx, "v2", cur.Info.Version), ErrTagNotFound, storage.ErrNotFound)
	refWantIs(t, "delete missing unconditionally", d.DeleteTag(refCtx, "v2", ""), ErrTagNotFound, storage.ErrNotFound)
	if _, err := d.CreateTag(refCtx, "v1", 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteTag(refCtx, "v1", ""); err != nil {
		t.Fatal(err)
	}
	if tags, err := d.ListTags(refCtx); err != nil || len(tags) != 0 {
		t.Fatalf("ListTags after deletes = %v, %v", refTagNames(tags), err)
	}
}

func TestCreateTagOnBranchMemory(t *testing.T) {
	s := refMemStore(t)
	d := refFakeDataset(t, s, "t.lance", 100, 200)
	b, err := d.Branch("feat/x")
	if err != nil || b.Root != "t.lance/tree/feat/x" {
		t.Fatalf("Branch = %+v, %v", b, err)
	}
	refFakeDataset(t, s, b.Root, 0, 230, 550) // versions 2 and 3 matter
	tag, err := d.CreateTagOnBranch(refCtx, "bt", "feat/x", 3, nil)
	if err != nil || tag.Branch != "feat/x" || tag.ManifestSize != 550 || tag.Info.Key != "t.lance/_refs/tags/bt.json" {
		t.Fatalf("CreateTagOnBranch = %+v, %v", tag, err)
	}
	if tag, err := d.CreateTagOnBranch(refCtx, "mt", "main", 2, nil); err != nil || tag.Branch != "" || tag.ManifestSize != 200 {
		t.Fatalf("a tag on \"main\" is a tag on main: %+v, %v", tag, err)
	}
	_, err = d.CreateTagOnBranch(refCtx, "x", "nosuch", 1, nil)
	refWantIs(t, "tag on a missing branch", err, ErrNotDataset)
	_, err = d.CreateTagOnBranch(refCtx, "x", "a//b", 1, nil)
	refWantIs(t, "tag on a bad branch name", err, ErrInvalidName)
	tags, err := d.ListTags(refCtx)
	if err != nil || refTagNames(tags) != "bt,mt" || tags[0].Branch != "feat/x" || tags[0].Version != 3 {
		t.Fatalf("ListTags = %+v, %v", tags, err)
	}
}

// A malformed tag file is reported with its key, never stops the listing,
// and the good tags still come back; files Lance ignores are ignored.
func TestListTagsMalformedMemory(t *testing.T) {
	s := refMemStore(t)
	d := refFakeDataset(t, s, "t.lance", 10, 20)
	for _, n := range []string{"a", "c"} {
		if _, err := d.CreateTag(refCtx, n, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	refPut(t, s, "t.lance/_refs/tags/old.json", `{"version":2,"manifestSize":20}`)
	refPut(t, s, "t.lance/_refs/tags/b.json", `{"version":`)
	refPut(t, s, "t.lance/_refs/tags/sp ace.json", `{"version":1,"manifestSize":10}`)
	refPut(t, s, "t.lance/_refs/tags/dir.json/inner", `x`)
	refPut(t, s, "t.lance/_refs/tags/README", `ignored`)
	refPut(t, s, "t.lance/_refs/tags/sub/x.json", `ignored`)
	tags, err := d.ListTags(refCtx)
	if refTagNames(tags) != "a,c,old" {
		t.Fatalf("good tags %q", refTagNames(tags))
	}
	refWantIs(t, "ListTags", err, ErrMalformedTag)
	var me *MalformedRefsError
	if !errors.As(err, &me) {
		t.Fatalf("%T is not a *MalformedRefsError", err)
	}
	want := "t.lance/_refs/tags/b.json,t.lance/_refs/tags/dir.json,t.lance/_refs/tags/sp ace.json"
	if got := strings.Join(me.Keys(), ","); got != want {
		t.Fatalf("malformed keys %s, want %s", got, want)
	}
	for _, k := range me.Keys() {
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", k)) {
			t.Errorf("the message does not name %s: %v", k, err)
		}
	}
	_, err = d.ReadTag(refCtx, "b")
	refWantIs(t, "ReadTag of a malformed file", err, ErrMalformedTag)
	if !strings.Contains(err.Error(), "t.lance/_refs/tags/b.json") {
		t.Fatalf("ReadTag does not name the key: %v", err)
	}
}

func refLanceTagsOf(t testing.TB, raw []byte) map[string]refLanceTag {
	return refDecode[map[string]refLanceTag](t, raw)
}

// Tags retain creates are listed by real Lance with the same version and
// manifest size, check out to the same rows as the version, on main and on
// a branch; their bytes match Lance's own up to the timestamps; and Lance's
// own tags read back identically.
func TestTagsRoundTripWithLance(t *testing.T) {
	dir := t.TempDir()
	res := refsRun(t, dir,
		refOp{"op": "create", "rows": 3},
		refOp{"op": "add", "rows": 2},
		refOp{"op": "delete", "where": "id = 1"},
		refOp{"op": "add", "rows": 1},
		refOp{"op": "branchCreate", "name": "feat/x", "from": "main", "version": 2},
		refOp{"op": "add", "rows": 4, "on": "feat/x"},
		refOp{"op": "tagCreate", "name": "lance-main", "version": 2},
		refOp{"op": "tagCreate", "name": "lance-branch", "version": 3, "on": "feat/x"},
	)
	if v := refDecode[refLanceCount](t, res[5]).Version; v != 3 {
		t.Fatalf("branch head after add = %d, want 3", v)
	}
	d := refLanceDataset(t, dir)

	// Lance's tags as retain reads them.
	tags, err := d.ListTags(refCtx)
	if err != nil || refTagNames(tags) != "lance-branch,lance-main" {
		t.Fatalf("ListTags = %v, %v", refTagNames(tags), err)
	}
	mv2, _ := d.VersionAt(refCtx, 2)
	fb, _ := d.Branch("feat/x")
	bv3, err := fb.VersionAt(refCtx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if lb := tags[0]; lb.Branch != "feat/x" || lb.Version != 3 || lb.ManifestSize != uint64(bv3.Info.Size) || time.Since(lb.CreatedAt) > time.Minute {
		t.Fatalf("Lance's branch tag read as %+v", lb)
	}
	if lm := tags[1]; lm.Branch != "" || lm.Version != 2 || lm.ManifestSize != uint64(mv2.Info.Size) || lm.Metadata == nil {
		t.Fatalf("Lance's main tag read as %+v", lm)
	}

	// retain's tags, on main and on the branch.
	for _, c := range []struct {
		name, branch string
		version      uint64
	}{{"r2", "", 2}, {"r4", "", 4}, {"rb3", "feat/x", 3}, {"rb2", "feat/x", 2}} {
		if _, err := d.CreateTagOnBranch(refCtx, c.name, c.branch, c.version, map[string]string{"by": "retain"}); err != nil {
			t.Fatal(err)
		}
	}
	res = refsRun(t, dir,
		refOp{"op": "tags"},
		refOp{"op": "count", "ref": "r2"}, refOp{"op": "count", "ref": 2},
		refOp{"op": "count", "ref": "r4"}, refOp{"op": "count", "ref": 4},
		refOp{"op": "count", "ref": "rb3"}, refOp{"op": "countBranch", "name": "feat/x", "version": 3},
		refOp{"op": "count", "ref": "rb2"}, refOp{"op": "countBranch", "name": "feat/x", "version": 2},
		refOp{"op": "count", "ref": "lance-branch"},
	)
	lt := refLanceTagsOf(t, res[0])
	for _, tg := range []string{"r2", "r4", "rb3", "rb2"} {
		mine, err := d.ReadTag(refCtx, tg)
		if err != nil {
			t.Fatal(err)
		}
		if l, ok := lt[tg]; !ok || l.Version != mine.Version || l.ManifestSize != mine.ManifestSize {
			t.Errorf("Lance lists %s as %+v, retain wrote %+v", tg, l, mine)
		}
	}
	for i := 1; i < 9; i += 2 {
		byTag, byVersion := refDecode[refLanceCount](t, res[i]), refDecode[refLanceCount](t, res[i+1])
		if byTag != byVersion || byTag.Rows == 0 {
			t.Errorf("checkout by tag %s = %+v, by version %+v", res[i], byTag, byVersion)
		}
	}
	if got := refDecode[refLanceCount](t, res[9]); got != refDecode[refLanceCount](t, res[6]) {
		t.Errorf("Lance's branch tag checks out %+v, want %s", got, res[6])
	}

	// retain's file is Lance's file, up to the timestamps.
	mineBody := refReadFile(t, filepath.Join(dir, "t.lance/_refs/tags/r2.json"))
	lanceBody := refReadFile(t, filepath.Join(dir, "t.lance/_refs/tags/lance-main.json"))
	mineBody = strings.Replace(mineBody, "{\n    \"by\": \"retain\"\n  }", "{}", 1)
	if a, b := tsRE.ReplaceAllString(mineBody, "TS"), tsRE.ReplaceAllString(lanceBody, "TS"); a != b {
		t.Fatalf("retain wrote\n%s\nLance wrote\n%s", mineBody, lanceBody)
	}
	mineBody = refReadFile(t, filepath.Join(dir, "t.lance/_refs/tags/rb3.json"))
	lanceBody = refReadFile(t, filepath.Join(dir, "t.lance/_refs/tags/lance-branch.json"))
	mineBody = strings.Replace(mineBody, "{\n    \"by\": \"retain\"\n  }", "{}", 1)
	if a, b := tsRE.ReplaceAllString(mineBody, "TS"), tsRE.ReplaceAllString(lanceBody, "TS"); a != b {
		t.Fatalf("retain wrote\n%s\nLance wrote\n%s", mineBody, lanceBody)
	}
}

// A malformed tag file: retain lists the rest and names it; Lance's own
// listing fails on it. A stale delete-if-version is refused and the tag
// stays; a deleted tag disappears from Lance's list.
func TestTagsMalformedAndDeleteWithLance(t *testing.T) {
	dir := t.TempDir()
	refsRun(t, dir,
		refOp{"op": "create", "rows": 2},
		refOp{"op": "add", "rows": 1},
	)
	d := refLanceDataset(t, dir)
	// The first tag of the dataset: retain creates _refs/tags/.
	mine, err := d.CreateTag(refCtx, "mine", 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	refsRun(t, dir, refOp{"op": "tagCreate", "name": "keep", "version": 1})
	bad := filepath.Join(dir, "t.lance/_refs/tags/broken.json")
	refWriteFile(t, bad, `{"version": 1, "manifestSize": "big"}`)
	tags, err := d.ListTags(refCtx)
	refWantIs(t, "ListTags", err, ErrMalformedTag)
	var me *MalformedRefsError
	if !errors.As(err, &me) || strings.Join(me.Keys(), ",") != "t.lance/_refs/tags/broken.json" || refTagNames(tags) != "keep,mine" {
		t.Fatalf("ListTags = %q, %v", refTagNames(tags), err)
	}
	res := refsRun(t, dir, refOp{"op": "tags", "try": true})
	if refLanceError(t, res[0]) == "" {
		t.Fatalf("Lance listed tags despite the malformed file: %s", res[0])
	}
	refRemove(t, bad)

	// Lance rewrites the tag (tags.update): retain's token is stale.
	refsRun(t, dir, refOp{"op": "tagUpdate", "name": "mine", "version": 1})
	err = d.DeleteTag(refCtx, "mine", mine.Info.Version)
	refWantIs(t, "stale delete", err, ErrTagChanged, storage.ErrPreconditionFailed)
	res = refsRun(t, dir, refOp{"op": "tags"})
	if l, ok := refLanceTagsOf(t, res[0])["mine"]; !ok || l.Version != 1 {
		t.Fatalf("after the refused delete Lance lists %s", res[0])
	}
	cur, err := d.ReadTag(refCtx, "mine")
	if err != nil || cur.Version != 1 {
		t.Fatalf("ReadTag = %+v, %v", cur, err)
	}
	if err := d.DeleteTag(refCtx, "mine", cur.Info.Version); err != nil {
		t.Fatal(err)
	}
	res = refsRun(t, dir, refOp{"op": "tags"}, refOp{"op": "count", "ref": "mine", "try": true})
	if lt := refLanceTagsOf(t, res[0]); len(lt) != 1 || lt["keep"].Version != 1 {
		t.Fatalf("after the delete Lance lists %s", res[0])
	}
	if refLanceError(t, res[1]) == "" {
		t.Fatalf("Lance still checks out the deleted tag: %s", res[1])
	}
}

// On a V1-named dataset too, a tag retain writes is one Lance checks out.
func TestTagV1NamingWithLance(t *testing.T) {
	dir := t.TempDir()
	lanceOps := []refOp{{"op": "create", "rows": 3}, {"op": "add", "rows": 2}, {"op": "add", "rows": 2}}
	refsRunNaming(t, dir, "v1", lanceOps...)
	d := refLanceDataset(t, dir)
	v2, err := d.VersionAt(refCtx, 2)
	if err != nil || v2.Naming != NamingV1 {
		t.Fatalf("version 2 = %+v, %v", v2, err)
	}
	tag, err := d.CreateTag(refCtx, "v1-named", 2, nil)
	if err != nil || tag.ManifestSize != uint64(v2.Info.Size) {
		t.Fatalf("CreateTag = %+v, %v", tag, err)
	}
	res := refsRun(t, dir, refOp{"op": "tags"}, refOp{"op": "count", "ref": "v1-named"}, refOp{"op": "count", "ref": 2})
	if l := refLanceTagsOf(t, res[0])["v1-named"]; l.Version != 2 || l.ManifestSize != tag.ManifestSize {
		t.Fatalf("Lance lists %s", res[0])
	}
	if a, b := refDecode[refLanceCount](t, res[1]), refDecode[refLanceCount](t, res[2]); a != b || a.Rows != 5 {
		t.Fatalf("by tag %+v, by version %+v", a, b)
	}
}
