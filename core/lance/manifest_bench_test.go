package lance

import (
	"os"
	"testing"
)

// BenchmarkParseManifest parses the manifest of a table of 300 single-row
// appends written by real Lance (one fragment per append).
func BenchmarkParseManifest(b *testing.B) {
	mb, err := os.ReadFile(benchManifest)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(mb)))
	b.ReportAllocs()
	for b.Loop() {
		m, err := ParseManifest(mb)
		if err != nil || len(m.Fragments) != benchFragments {
			b.Fatalf("%v, %d fragments", err, len(m.Fragments))
		}
	}
}

// BenchmarkManifestFiles adds resolving every referenced file to keys.
func BenchmarkManifestFiles(b *testing.B) {
	mb, err := os.ReadFile(benchManifest)
	if err != nil {
		b.Fatal(err)
	}
	d := &Dataset{Root: "db/m.lance"}
	b.SetBytes(int64(len(mb)))
	b.ReportAllocs()
	for b.Loop() {
		m, err := ParseManifest(mb)
		if err != nil {
			b.Fatal(err)
		}
		m.Key = "db/m.lance/_versions/x.manifest"
		refs, err := d.resolveFiles(m)
		if err != nil || len(refs) < benchFragments {
			b.Fatalf("%v, %d refs", err, len(refs))
		}
	}
}
