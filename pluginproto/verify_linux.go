//go:build linux

package pluginproto

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// memfdImage copies src into a sealed memfd. errNoMemfd means this system
// cannot execute one, and the caller falls back to a copy on disk.
func memfdImage(src io.Reader, name string) (*verifiedImage, []byte, error) {
	const flags = unix.MFD_CLOEXEC | unix.MFD_ALLOW_SEALING
	// MFD_EXEC (Linux 6.3) asks for an executable memfd explicitly; older
	// kernels refuse the flag and make every memfd executable.
	fd, err := unix.MemfdCreate("retain-plugin:"+name, flags|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) {
		fd, err = unix.MemfdCreate("retain-plugin:"+name, flags)
	}
	if err != nil {
		// ENOSYS: no memfds; EACCES: vm.memfd_noexec forbids exec.
		return nil, nil, fmt.Errorf("%w: memfd_create: %v", errNoMemfd, err)
	}
	rw := os.NewFile(uintptr(fd), "memfd:retain-plugin:"+name)
	defer rw.Close()
	sum, err := copyHashed(rw, src)
	if err != nil {
		return nil, nil, err
	}
	// From here the image cannot change: not its bytes, not its size, not
	// its seals.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS,
		unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE|unix.F_SEAL_SEAL); err != nil {
		return nil, nil, fmt.Errorf("%w: sealing the memfd: %v", errNoMemfd, err)
	}
	// exec refuses a file anyone holds open for writing (ETXTBSY), so run
	// a read-only descriptor of the image and close the writable one.
	ro, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: reopening the memfd through /proc: %v", errNoMemfd, err)
	}
	n := int(ro.Fd())
	if n < 3 {
		// Standard descriptors were closed and the image took one: move
		// it above them, where the child can have it at the same number.
		m, err := unix.FcntlInt(uintptr(n), unix.F_DUPFD_CLOEXEC, 3)
		ro.Close()
		if err != nil {
			return nil, nil, err
		}
		ro, n = os.NewFile(uintptr(m), "memfd:retain-plugin:"+name), m
	}
	// The child gets the image at descriptor n too (nil entries are closed
	// in the child), so /proc/self/fd/n names it there. Serve closes that
	// inherited descriptor (closeInheritedImage).
	extra := make([]*os.File, n-3+1)
	extra[n-3] = ro
	return &verifiedImage{path: fmt.Sprintf("/proc/self/fd/%d", n), extraFiles: extra, file: ro, memfd: true,
		env: []string{envImageFD + "=" + strconv.Itoa(n)}}, sum, nil
}

// closeInheritedImage closes the descriptor of its own image a plugin run
// from a memfd inherits, once exec no longer needs it, so it does not pass
// on to the plugin's own children. Only a descriptor that is such an image
// is closed.
func closeInheritedImage() {
	n, err := strconv.Atoi(os.Getenv(envImageFD))
	if err != nil || n < 3 {
		return
	}
	os.Unsetenv(envImageFD)
	if target, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", n)); err == nil && strings.HasPrefix(target, "/memfd:retain-plugin:") {
		unix.Close(n)
	}
}
