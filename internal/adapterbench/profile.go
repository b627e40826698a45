package adapterbench

import (
	"context"
	"os"
	"runtime/pprof"
	"sync"

	"github.com/retain-dev/retain/core/storage"
)

// EnvPluginCPUProfile names a file a plugin that Dispatch serves writes a
// CPU profile of itself to, from the store's Open to its Close: a benchmark
// run through the boundary can then be profiled on both sides (the host
// side profiles itself). The plugin inherits it from the host's
// environment.
const EnvPluginCPUProfile = "RETAIN_BENCH_PLUGIN_CPUPROFILE"

// StartCPUProfile writes a CPU profile to path until the returned stop is
// called. One run is short (a few dozen samples): merge the profiles of
// many (go tool pprof takes several files).
func StartCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			f.Close()
		})
	}, nil
}

// profiled wraps adapters so that, with EnvPluginCPUProfile set, the
// store's Open starts the profile and the driver's Close ends it.
func profiled(adapters []storage.Adapter) []storage.Adapter {
	path := os.Getenv(EnvPluginCPUProfile)
	if path == "" {
		return adapters
	}
	out := make([]storage.Adapter, len(adapters))
	for i, a := range adapters {
		open := a.Open
		a.Open = func(ctx context.Context, loc storage.Location) (storage.Driver, error) {
			stop, err := StartCPUProfile(path)
			if err != nil {
				return nil, err
			}
			d, err := open(ctx, loc)
			if err != nil {
				stop()
				return nil, err
			}
			return wrapClose(d, stop), nil
		}
		out[i] = a
	}
	return out
}

// profiledDriver stops the profile on Close; it keeps the driver's batch
// reads, which the plugin offers only for a storage.BatchReader.
type profiledDriver struct {
	storage.Driver
	stop func()
}

func (d profiledDriver) Close() error { err := d.Driver.Close(); d.stop(); return err }

type profiledBatchDriver struct {
	profiledDriver
	storage.BatchReader
}

func wrapClose(d storage.Driver, stop func()) storage.Driver {
	p := profiledDriver{d, stop}
	if br, ok := d.(storage.BatchReader); ok {
		return profiledBatchDriver{p, br}
	}
	return p
}
