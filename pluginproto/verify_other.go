//go:build !linux

package pluginproto

import "io"

// memfdImage: there are no memfds here; the image is a private copy.
func memfdImage(io.Reader, string) (*verifiedImage, []byte, error) {
	return nil, nil, errNoMemfd
}

// closeInheritedImage: nothing is inherited here.
func closeInheritedImage() {}
