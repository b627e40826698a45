package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/retain-dev/retain/core/lance"
)

// printInspection is the text form of a report.
func printInspection(w io.Writer, r *inspectReport) {
	naming := ""
	if r.Naming != "" {
		naming = ", " + strings.ToUpper(r.Naming) + " manifest names"
	}
	fmt.Fprintf(w, "Lance dataset %s (%s%s)\n", r.URI, r.Adapter, naming)
	if r.Files != nil {
		printVersionFiles(w, r)
	} else {
		for _, g := range r.Branches {
			fmt.Fprintln(w)
			printGroup(w, g)
		}
		if len(r.Tags) > 0 {
			fmt.Fprintf(w, "\ntags (%d):\n", len(r.Tags))
			tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
			for _, t := range r.Tags {
				note := ""
				if t.Dangling {
					note = "\tDANGLING: no such version"
				}
				fmt.Fprintf(tw, "  %s\t%s v%d\t%s%s\n", t.Name, t.Branch, t.Version, t.Key, note)
			}
			tw.Flush()
		}
	}
	if len(r.Problems) > 0 {
		fmt.Fprintf(w, "\nPROBLEMS (%d): could not be read; everything else is shown above\n", len(r.Problems))
		for _, p := range r.Problems {
			fmt.Fprintf(w, "  %s %s: %s\n", problemLabel(p.What), orDash(p.Key), p.Reason)
		}
	}
	if len(r.Warnings) > 0 {
		fmt.Fprintf(w, "\nwarnings (%d):\n", len(r.Warnings))
		for _, p := range r.Warnings {
			fmt.Fprintf(w, "  %s %s: %s\n", p.What, orDash(p.Key), p.Reason)
		}
	}
	if s := r.Summary; s != nil {
		fmt.Fprintln(w)
		var per []string
		for _, g := range r.Branches {
			per = append(per, fmt.Sprintf("%s %d", g.Name, len(g.Versions)))
		}
		unreadable := ""
		if s.UnreadableVersions > 0 {
			unreadable = fmt.Sprintf(", %d unreadable", s.UnreadableVersions)
		}
		fmt.Fprintf(w, "%d versions (%s%s), %d tags, %d branches\n", s.Versions, strings.Join(per, ", "), unreadable, s.Tags, s.Branches)
		if l := s.Latest; l != nil {
			fmt.Fprintf(w, "latest: %s v%d references %d files, %s%s\n", l.Branch, l.Version, l.Files, humanBytes(l.Bytes), unknownNote(l.UnknownSizes))
		}
		fmt.Fprintf(w, "all versions shown reference %d files, %s%s\n", s.ReferencedFiles, humanBytes(s.ReferencedBytes), unknownNote(s.ReferencedUnknownSizes))
		if f := s.Folder; f != nil {
			fmt.Fprintf(w, "dataset folder: %d objects, %s\n", f.Objects, humanBytes(f.Bytes))
		} else {
			fmt.Fprintln(w, "dataset folder: not listed")
		}
	}
}

func problemLabel(what string) string {
	switch what {
	case "tag", "branch":
		return "malformed " + what + " file"
	case "tags", "branches":
		return what
	case "manifest":
		return "unreadable manifest"
	case "versions":
		return "versions not listed"
	case "listing":
		return "listing failed"
	}
	return what
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printGroup(w io.Writer, g *lance.InspectedBranch) {
	head := "no versions"
	if g.Head != nil {
		head = fmt.Sprintf("head v%d", *g.Head)
	}
	if g.Parent == nil {
		fmt.Fprintf(w, "%s: %d versions, %s\n", g.Name, len(g.Versions), head)
	} else {
		fmt.Fprintf(w, "branch %s: forked from %s v%d, %d versions, %s (%s)\n", g.Name, g.Parent.Branch, g.Parent.Version, len(g.Versions), head, orDash(g.RefKey))
	}
	if len(g.Versions) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  VERSION\tTIME (UTC)\tMANIFEST\tFILES\tBYTES\tPOINTED AT BY")
	for _, vr := range g.Versions {
		fmt.Fprintf(tw, "  %d\t%s\t%d\t%s\t%s\t%s\n", vr.Version, fmtTime(vr.Time), vr.ManifestSize, filesCell(vr), bytesCell(vr), pointers(g, vr))
	}
	tw.Flush()
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

func filesCell(vr *lance.InspectedVersion) string {
	if vr.Error != "" {
		return "-"
	}
	return strconv.Itoa(vr.Files)
}

func bytesCell(vr *lance.InspectedVersion) string {
	if vr.Error != "" {
		return "-"
	}
	s := strconv.FormatInt(vr.Bytes, 10)
	var notes []string
	if vr.UnknownSizes > 0 {
		notes = append(notes, fmt.Sprintf("+%d unknown", vr.UnknownSizes))
	}
	if vr.Missing > 0 {
		notes = append(notes, fmt.Sprintf("%d missing", vr.Missing))
	}
	if len(notes) > 0 {
		s += " (" + strings.Join(notes, ", ") + ")"
	}
	return s
}

func pointers(g *lance.InspectedBranch, vr *lance.InspectedVersion) string {
	var p []string
	if vr.Error != "" {
		p = append(p, "UNREADABLE MANIFEST")
	}
	if vr.Head {
		p = append(p, "head of "+g.Name)
	}
	if vr.ForkOf != nil {
		p = append(p, fmt.Sprintf("fork of %s v%d", vr.ForkOf.Branch, vr.ForkOf.Version))
	}
	for _, t := range vr.Tags {
		p = append(p, "tag "+t)
	}
	for _, b := range vr.ForkedBy {
		p = append(p, "fork point of branch "+b)
	}
	return strings.Join(p, "; ")
}

func printVersionFiles(w io.Writer, r *inspectReport) {
	g := r.Branches[0]
	vr := g.Versions[0]
	fmt.Fprintf(w, "\n%s v%d: %s, manifest %s (%d bytes)", branchLabel(g.Name), vr.Version, fmtTime(vr.Time), vr.ManifestKey, vr.ManifestSize)
	if p := pointers(g, vr); p != "" {
		fmt.Fprintf(w, "; %s", p)
	}
	fmt.Fprintln(w)
	if vr.Error != "" {
		return
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  KEY\tKIND\tSIZE\tFROM")
	for _, f := range r.Files {
		size := "?"
		if f.Size != nil {
			size = strconv.FormatInt(*f.Size, 10)
		}
		kind := f.Kind
		if f.Folder {
			kind += " (folder)"
		}
		from := "own"
		switch {
		case f.Outside:
			from = "OUTSIDE the dataset family (never deleted)"
		case f.Inherited:
			from = "inherited from " + f.Owner
		}
		if f.Missing {
			from += "; MISSING from the folder"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", f.Key, kind, size, from)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d files, %s%s", vr.Files, humanBytes(vr.Bytes), unknownNote(vr.UnknownSizes))
	if vr.Missing > 0 {
		fmt.Fprintf(w, ", %d missing", vr.Missing)
	}
	fmt.Fprintln(w)
}

func unknownNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" + %d of unknown size", n)
}

// humanBytes renders n as "512 bytes" or "3.1 KiB (3172 bytes)".
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB (%d bytes)", float64(n)/float64(div), "KMGTPE"[exp], n)
}
func branchLabel(name string) string {
	if name == "main" {
		return "main"
	}
	return "branch " + strconv.Quote(name)
}
