package lance

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/storage"
)

// FuzzParseManifest: the parser never panics, never accepts bytes that fail
// the footer and section checks, fails only with its typed refusals, and a
// manifest it accepts can never make retain name a key outside the dataset
// family (which a cleanup might then delete).
//
//	go test -run '^$' -fuzz FuzzParseManifest -fuzztime 60s ./core/lance/
func FuzzParseManifest(f *testing.F) {
	for _, b := range fixtureManifests(f) {
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte("LANC"))
	f.Add(synthetic(pb{}.bytes(2, dataFile("x.lance", 1).varint(7, 0)), pb{}.bytes(18, pb{}.varint(3, 1).str(4, "/a/db/t.lance")), nil))
	d := &Dataset{Root: "db/t.lance/tree/b"}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseManifest(b)
		if err != nil {
			if m != nil {
				t.Fatal("a manifest returned with an error")
			}
			if !errors.Is(err, ErrCorruptManifest) && !errors.Is(err, ErrUnknownFeature) {
				t.Fatalf("untyped refusal: %v", err)
			}
			return
		}
		// Independent footer and section checks (the format version is
		// not checked: Lance reads any).
		if len(b) < 20 || !bytes.Equal(b[len(b)-4:], []byte("LANC")) {
			t.Fatal("accepted a bad footer")
		}
		pos := binary.LittleEndian.Uint64(b[len(b)-16:])
		if pos > uint64(len(b)-20) || pos+4+uint64(binary.LittleEndian.Uint32(b[pos:])) != uint64(len(b)-16) {
			t.Fatal("accepted a manifest section that does not end at the footer")
		}
		if m.Version == 0 || (m.ReaderFlags|m.WriterFlags)&^KnownFeatures != 0 {
			t.Fatalf("accepted version %d flags %#x/%#x", m.Version, m.ReaderFlags, m.WriterFlags)
		}
		m.Key = "db/t.lance/tree/b/_versions/1.manifest"
		refs, err := d.resolveFiles(m)
		if err != nil {
			if !errors.Is(err, ErrCorruptManifest) {
				t.Fatalf("untyped refusal: %v", err)
			}
			return
		}
		for _, r := range refs {
			if r.Outside {
				continue
			}
			if !strings.HasPrefix(r.Key, "db/t.lance/") {
				t.Fatalf("a reference escapes the dataset family: %+v", r)
			}
			if err := storage.ValidateKey("fuzz", strings.TrimSuffix(r.Key, "/")); err != nil {
				t.Fatalf("an invalid key: %+v: %v", r, err)
			}
		}
	})
}
