package main

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Every `retain …` command that a message, help text or doc names exists,
// with the flags it names: a hint that names a command that does not exist
// (`retain cleanup runs`) sends the operator nowhere. Scanned: the string
// literals of every non-test Go file of the module (mentions quoted in
// backticks or single quotes) and README.md and docs/*.md (inline code and
// command lines of fenced blocks).
func TestEveryNamedCommandExists(t *testing.T) {
	root := (&app{stdout: io.Discard, stderr: io.Discard}).rootCmd()
	modRoot := filepath.Join("..", "..")
	type mention struct{ where, text string }
	var mentions []mention

	quoted := regexp.MustCompile("(?:`|')retain ([^`'\n]+)")
	fset := token.NewFileSet()
	err := filepath.WalkDir(modRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") && path != modRoot {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, m := range quoted.FindAllStringSubmatch(s, -1) {
				mentions = append(mentions, mention{fset.Position(lit.Pos()).String(), m[1]})
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	inGo := len(mentions)
	docs, _ := filepath.Glob(filepath.Join(modRoot, "docs", "*.md"))
	docs = append(docs, filepath.Join(modRoot, "README.md"))
	inline := regexp.MustCompile("`(?:\\S*/)?retain ([^`]+)`")
	line := regexp.MustCompile(`(?:^|[\s;&|(]|\$ )(?:\S*/)?retain ((?:[a-z]|-).*)`)
	for _, doc := range docs {
		f, err := os.Open(doc)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		fenced, output := false, false
		for n := 1; sc.Scan(); n++ {
			l := sc.Text()
			where := doc + ":" + strconv.Itoa(n)
			if strings.HasPrefix(strings.TrimSpace(l), "```") {
				// A ```text block is output, not command lines.
				fenced, output = !fenced, !fenced && strings.TrimSpace(l) == "```text"
				continue
			}
			if fenced && output {
				continue
			}
			if fenced {
				if m := line.FindStringSubmatch(l); m != nil {
					mentions = append(mentions, mention{where, strings.SplitN(m[1], " #", 2)[0]})
				}
				continue
			}
			for _, m := range inline.FindAllStringSubmatch(l, -1) {
				mentions = append(mentions, mention{where, m[1]})
			}
		}
		f.Close()
	}
	if inGo < 20 || len(mentions)-inGo < 50 {
		t.Fatalf("found only %d command mentions: the scan is broken", len(mentions))
	}
	t.Logf("%d command mentions checked: %d in Go string literals, %d in docs", len(mentions), inGo, len(mentions)-inGo)
	for _, m := range mentions {
		if why := resolveMention(root, m.text); why != "" {
			t.Errorf("%s: `retain %s`: %s", m.where, m.text, why)
		}
	}
}

var commandWord = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// resolveMention walks the words of a mention down the command tree: while
// the command has subcommands, a plain lowercase word (or words joined by
// '|') must name one; every --flag must be one the command accepts. Anything
// else (placeholders, paths, values) ends the command path. It returns why
// the mention does not resolve, or "".
func resolveMention(root *cobra.Command, text string) string {
	cur, path, positional := root, "retain", false
	words := strings.Fields(text)
	for i := 0; i < len(words); i++ {
		w := strings.TrimRight(words[i], ".,;:)")
		switch {
		case strings.HasPrefix(w, "--"):
			name, _, hasValue := strings.Cut(strings.TrimPrefix(w, "--"), "=")
			if !commandWord.MatchString(name) {
				continue // --flag placeholders, "--" itself
			}
			f := cur.Flag(name)
			if f == nil {
				return "`" + path + "` has no flag --" + name
			}
			if !hasValue && f.NoOptDefVal == "" {
				i++ // the flag's value
			}
		case positional:
		case cur.HasSubCommands() && isCommandWords(w):
			var next *cobra.Command
			for _, alt := range strings.Split(w, "|") {
				if next = findSub(cur, alt); next == nil {
					return "`" + path + "` has no command " + alt
				}
			}
			cur, path = next, path+" "+strings.Split(w, "|")[0]
		case cur == root:
			return "" // not a command line: prose that happens to begin "retain "
		default:
			positional = true // arguments; later --flags are still checked
		}
	}
	return ""
}

func isCommandWords(w string) bool {
	for _, alt := range strings.Split(w, "|") {
		if !commandWord.MatchString(alt) {
			return false
		}
	}
	return true
}

func findSub(c *cobra.Command, name string) *cobra.Command {
	for _, sub := range c.Commands() {
		if sub.Name() == name || sub.HasAlias(name) {
			return sub
		}
	}
	return nil
}

// The walk itself: what it must refuse and what it must accept.
func TestResolveMention(t *testing.T) {
	root := (&app{stdout: io.Discard, stderr: io.Discard}).rootCmd()
	for _, bad := range []string{"cleanup runs", "cleanup run --resume-op X", "claim takeover STORE --tokn T", "claim status|takover", "checkpoint creat NAME STORE", "keeps named checkpoints"} {
		if resolveMention(root, bad) == "" {
			t.Errorf("`retain %s` resolved", bad)
		}
	}
	for _, good := range []string{"cleanup run --resume --confirm-write-outage STORE", "claim status|takeover", "checkpoint show NAME STORE --deep --json",
		"cleanup preview --keep-last 3 /data/db", "%s STORE", "claim …", "--log-level debug status STORE", "tag create T v1 --meta k=v"} {
		if why := resolveMention(root, good); why != "" {
			t.Errorf("`retain %s`: %s", good, why)
		}
	}
}
