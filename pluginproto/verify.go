package pluginproto

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/retain-dev/retain/core/storage"
)

// A plugin binary with an expected digest is never run from its path: the
// path is read once, hashed as it is copied into a private image, and the
// image is what runs. So a swap at the path after the check (rename over it,
// or a rewrite in place) can only make the check fail, never run other
// bytes. go-plugin's SecureConfig is not used: it hashes the path and then
// executes the path, two reads with a window between them.
//
// The private image is, on Linux, a sealed memfd (no writes, no resizing,
// no new seals) executed as /proc/self/fd/N, like runc's cloned binary: it
// needs no writable directory that allows exec and leaves nothing on disk.
// Where memfds are missing or not executable (other systems, a kernel with
// vm.memfd_noexec=2, no /proc), it is a copy in a fresh 0700 directory
// under os.TempDir (TMPDIR), created O_EXCL and removed as soon as the
// process has started (on Unix a running binary may be unlinked) or else
// when the client closes.
//
// Executing an open descriptor of the original file would close the rename
// race but not a rewrite in place; copying closes both.

// verifiedImage is where the verified bytes of a plugin binary can be
// executed from.
type verifiedImage struct {
	// path is what to execute.
	path string
	// extraFiles are the command's ExtraFiles: for a memfd, the image at
	// the same descriptor number in the child as here, so path names it
	// in both processes (go-plugin's diagnostics stat it in the host).
	extraFiles []*os.File
	file       *os.File // the memfd, held until the child has exec'd
	memfd      bool
	env        []string // for the plugin's environment
	dir        string   // the copy's private directory
}

// started is called once the plugin process has exec'd (or failed to): the
// host's memfd descriptor and, where the system allows, the copy go. What
// remains is removed by release.
func (v *verifiedImage) started() {
	if v == nil {
		return
	}
	if v.file != nil {
		v.file.Close()
		v.file = nil
	}
	if v.dir != "" && os.RemoveAll(v.dir) == nil {
		v.dir = ""
	}
}

// release removes whatever started could not, after the process exited.
func (v *verifiedImage) release() {
	v.started()
	if v != nil && v.dir != "" {
		os.RemoveAll(v.dir)
	}
}

// envImageFD tells a plugin run from a memfd which inherited descriptor is
// its image, for Serve to close.
const envImageFD = "RETAIN_PLUGIN_IMAGE_FD"

// errDigest is a verified image whose bytes did not have the expected digest.
type errDigest struct{ actual []byte }

func (e *errDigest) Error() string { return fmt.Sprintf("actual SHA-256 %x", e.actual) }

// verifyImage reads the binary at path once into a private image, hashing
// exactly the bytes it writes there. A digest other than want is an
// *errDigest and leaves no image behind.
func verifyImage(path string, want []byte, noMemfd bool) (*verifiedImage, error) {
	src, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	if st, err := src.Stat(); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if !noMemfd {
		v, sum, err := memfdImage(src, filepath.Base(path))
		if err == nil {
			if !bytes.Equal(sum, want) {
				v.release()
				return nil, &errDigest{actual: sum}
			}
			return v, nil
		}
		if !errors.Is(err, errNoMemfd) {
			return nil, err
		}
		// Start over from the top of the file for the copy.
		if _, err := src.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
	}
	v, sum, err := copyImage(src, filepath.Base(path))
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(sum, want) {
		v.release()
		return nil, &errDigest{actual: sum}
	}
	return v, nil
}

// errNoMemfd says this system cannot run a plugin from a memfd.
var errNoMemfd = errors.New("no executable memfd on this system")

// copyImage copies src into a new file in a fresh private directory.
func copyImage(src io.Reader, name string) (*verifiedImage, []byte, error) {
	dir, err := os.MkdirTemp("", "retain-plugin-")
	if err != nil {
		return nil, nil, err
	}
	v := &verifiedImage{dir: dir, path: filepath.Join(dir, name)}
	f, err := os.OpenFile(v.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o700)
	if err != nil {
		v.release()
		return nil, nil, err
	}
	sum, err := copyHashed(f, src)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		v.release()
		return nil, nil, err
	}
	return v, sum, nil
}

// copyHashed copies src to dst and returns the SHA-256 of what it wrote.
func copyHashed(dst io.Writer, src io.Reader) ([]byte, error) {
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(dst, h), src); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// isTextBusy reports an exec refused because some process still has the
// image open for writing: a fork elsewhere in this process can hold a
// descriptor of the image from before it was sealed or closed for the
// moment until that child execs. Trying again is the cure.
func isTextBusy(err error) bool { return errors.Is(err, syscall.ETXTBSY) }

// digestError is the refusal of a binary whose digest is not the expected one.
func digestError(name, path, expected string, actual []byte) error {
	return &storage.Error{Op: "launch", Kind: storage.ErrPermissionDenied, Msg: fmt.Sprintf(
		"refusing to run plugin %s for adapter %q: its SHA-256 does not match: expected %s, actual %x "+
			"(reinstall the plugin, or record the new digest if you trust this binary)",
		path, name, expected, actual)}
}
