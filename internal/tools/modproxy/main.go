// Command modproxy writes a file-based Go module proxy holding every module
// of this tree's go.work at one candidate version, zipped from the working
// tree as it is (files git tracks, and untracked ones it does not ignore).
// With GOPROXY=file://DIR ahead of the usual proxy, and GOWORK=off, the go
// command then installs and requires retain's modules by name exactly as it
// will once they are tagged (.ci/install-check, docs/releasing.md).
//
//	go run ./internal/tools/modproxy -version v0.1.0 -out DIR
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

func main() {
	version := flag.String("version", "", "the candidate version every module gets, e.g. v0.1.0")
	out := flag.String("out", "", "the proxy directory to write (GOPROXY=file://DIR)")
	flag.Parse()
	if *version == "" || *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: modproxy -version v0.1.0 -out DIR")
		os.Exit(2)
	}
	if err := run(*version, *out); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

func run(version, out string) error {
	top, err := git(".", "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	top = strings.TrimSpace(top)
	work, err := os.ReadFile(filepath.Join(top, "go.work"))
	if err != nil {
		return err
	}
	wf, err := modfile.ParseWork("go.work", work, nil)
	if err != nil {
		return err
	}
	listed, err := git(top, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return err
	}
	files := strings.Split(strings.TrimRight(listed, "\x00"), "\x00")
	for _, u := range wf.Use {
		dir := path.Clean(u.Path)
		if err := write(top, dir, files, version, out); err != nil {
			return fmt.Errorf("module in %s: %w", dir, err)
		}
	}
	return nil
}

// write zips the module in dir (slash path relative to top) into out.
func write(top, dir string, files []string, version, out string) error {
	gomod, err := os.ReadFile(filepath.Join(top, dir, "go.mod"))
	if err != nil {
		return err
	}
	mf, err := modfile.ParseLax("go.mod", gomod, nil)
	if err != nil {
		return err
	}
	mv := module.Version{Path: mf.Module.Mod.Path, Version: version}
	var zfiles []modzip.File
	for _, f := range files {
		rel, ok := within(dir, f)
		if !ok || inNestedModule(top, dir, rel) {
			continue
		}
		if _, err := os.Lstat(filepath.Join(top, f)); err != nil {
			continue // deleted in the working tree
		}
		zfiles = append(zfiles, file{abs: filepath.Join(top, f), rel: rel})
	}
	esc, err := module.EscapePath(mv.Path)
	if err != nil {
		return err
	}
	vdir := filepath.Join(out, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	var zb bytes.Buffer
	if err := modzip.Create(&zb, mv, zfiles); err != nil {
		return err
	}
	info, _ := json.Marshal(map[string]any{"Version": version, "Time": time.Now().UTC().Format(time.RFC3339)})
	for name, body := range map[string][]byte{version + ".zip": zb.Bytes(), version + ".mod": gomod, version + ".info": info, "list": []byte(version + "\n")} {
		if err := os.WriteFile(filepath.Join(vdir, name), body, 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("%s@%s: %d files\n", mv.Path, version, len(zfiles))
	return nil
}

// within returns f relative to dir when f is inside it.
func within(dir, f string) (string, bool) {
	if dir == "." {
		return f, true
	}
	if rel, ok := strings.CutPrefix(f, dir+"/"); ok {
		return rel, true
	}
	return "", false
}

// inNestedModule says whether rel (inside the module in dir) lies under a
// folder of its own holding a go.mod: that is another module (a nested one,
// or a test fixture), never part of this module's zip.
func inNestedModule(top, dir, rel string) bool {
	for d := path.Dir(rel); d != "."; d = path.Dir(d) {
		if _, err := os.Stat(filepath.Join(top, dir, d, "go.mod")); err == nil {
			return true
		}
	}
	return false
}

type file struct{ abs, rel string }

func (f file) Path() string                 { return f.rel }
func (f file) Lstat() (fs.FileInfo, error)  { return os.Lstat(f.abs) }
func (f file) Open() (io.ReadCloser, error) { return os.Open(f.abs) }

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return string(b), nil
}
