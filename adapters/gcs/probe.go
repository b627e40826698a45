package gcs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	gcsapi "cloud.google.com/go/storage"

	"github.com/retain-dev/retain/core/storage"
)

// probeCleanupTimeout bounds the removal of the probe's scratch object.
const probeCleanupTimeout = 10 * time.Second

// deleteStrategy is how a delete-if-version is sent.
type deleteStrategy uint8

const (
	delNone deleteStrategy = iota
	// delByGeneration: objects.delete?generation=G. GCS deletes exactly
	// generation G, or answers 404 when no such generation exists. Right
	// on a bucket without object versioning (every emulator honours it);
	// on one with versioning a stale G may survive as a noncurrent version,
	// and deleting that succeeds while the live object stays.
	delByGeneration
	// delByMatch: objects.delete?ifGenerationMatch=G on the live object.
	// Right on real GCS whether or not the bucket keeps versions;
	// fake-gcs-server ignores the condition.
	delByMatch
)

func (s deleteStrategy) String() string {
	switch s {
	case delByGeneration:
		return "objects.delete naming the generation (generation=G)"
	case delByMatch:
		return "objects.delete with ifGenerationMatch=G"
	}
	return "none"
}

// delObservation is what one open-time probe of a strategy saw on a scratch
// object written twice (generations stale, then live).
type delObservation struct {
	strategy deleteStrategy
	name     string // the scratch object
	// staleErr answers the delete naming the stale generation; staleKept
	// says the live generation was still there afterwards.
	staleErr  error
	staleKept bool
	// currentErr answers the delete naming the live generation;
	// currentGone says the object was gone afterwards.
	currentErr  error
	currentGone bool
	// skipped says why the probe could not run, if it could not.
	skipped string
}

// refused: the answer a conditional delete must give to a wrong generation.
func refused(err error) bool {
	return errors.Is(err, gcsapi.ErrObjectNotExist) || httpCode(err) == 412
}

// passed: the stale delete was refused and left the object, and the delete
// of the live generation removed it.
func (o delObservation) passed() bool {
	return o.skipped == "" && refused(o.staleErr) && o.staleKept && o.currentErr == nil && o.currentGone
}

func answer(err error) string {
	switch {
	case err == nil:
		return "success"
	case errors.Is(err, gcsapi.ErrObjectNotExist):
		return "404"
	case httpCode(err) != 0:
		return fmt.Sprintf("HTTP %d", httpCode(err))
	}
	return storage.KindOf(mapErr("delete", "", err)).String()
}

func (o delObservation) String() string {
	if !o.staleKept {
		return fmt.Sprintf("%s: with a stale generation answered %s and the live object was gone", o.strategy, answer(o.staleErr))
	}
	after := "kept"
	if o.currentGone {
		after = "gone"
	}
	return fmt.Sprintf("%s: with a stale generation answered %s and the object was kept; with the live generation answered %s and the object was %s",
		o.strategy, answer(o.staleErr), answer(o.currentErr), after)
}

// decideDelete turns the conditional-delete option and what the probes saw
// into the strategy, the declared capability and a note. gen is the probe
// of delByGeneration, match that of delByMatch (run only if gen failed).
func decideDelete(mode string, gen, match *delObservation) (deleteStrategy, storage.Capability, string) {
	native := func(reason string) storage.Capability {
		return storage.Capability{Level: storage.LevelNative, Scope: storage.ScopeGlobal, Reason: reason}
	}
	none := func(reason string) storage.Capability {
		return storage.Capability{Level: storage.LevelNone, Reason: reason}
	}
	switch mode {
	case modeOff:
		return delNone, none("conditional-delete=off in the store URI"),
			"conditional-delete=off: delete-if-version declared none without probing"
	case modeOn:
		return delByGeneration, native(
				"conditional-delete=on (not probed): objects.delete names the generation, and GCS deletes exactly the live one or answers 404; on a bucket with object versioning a stale generation may survive as a noncurrent version and be deleted instead, so use conditional-delete=auto there"),
			"conditional-delete=on: delete-if-version trusted without probing"
	}
	if gen == nil {
		return delNone, none("conditional delete was not probed"), "conditional-delete=auto: no probe ran"
	}
	if gen.skipped != "" {
		return delNone, none("the open-time probe could not run: " + gen.skipped),
			"conditional-delete=auto: probe skipped: " + gen.skipped
	}
	if gen.passed() {
		return delByGeneration, native(
				"objects.delete names the generation: GCS deletes exactly the live one or answers 404; probed at open"),
			"conditional-delete=auto: probe at " + gen.name + ": " + gen.String()
	}
	if match != nil && match.skipped == "" && match.passed() {
		return delByMatch, native(
				"objects.delete with ifGenerationMatch=<generation> on the live object (a delete naming a stale generation succeeded here, as on a bucket with object versioning); probed at open"),
			"conditional-delete=auto: probe at " + gen.name + ": " + gen.String() + "; probe at " + match.name + ": " + match.String()
	}
	why := "the open-time probe found no conditional delete this endpoint honours: " + gen.String()
	if match != nil {
		if match.skipped != "" {
			why += "; " + delByMatch.String() + ": probe skipped: " + match.skipped
		} else {
			why += "; " + match.String()
		}
	}
	return delNone, none(why), "conditional-delete=auto: " + why
}

// probeDelete tries strategy s on a scratch object under the store's
// prefix (<prefix>/.retain-probe/<random>) and removes every generation it
// wrote. Being refused access makes the observation skipped (the
// capability is then none, with the reason); any other failure fails Open,
// so a passing network error never changes what is declared.
func (d *Driver) probeDelete(ctx context.Context, s deleteStrategy) (delObservation, error) {
	name := d.prefix + probeDir + "/" + randHex()
	o := delObservation{strategy: s, name: d.bucketName + "/" + name}
	fail := func(what string, err error) (delObservation, error) {
		e := mapErr("open", name, err)
		if e.Kind == storage.ErrPermissionDenied {
			o.skipped = fmt.Sprintf("%s %s: %v", what, o.name, e)
			return o, nil
		}
		return o, &storage.Error{Op: "open", Key: name, Kind: e.Kind,
			Msg: "probing conditional delete (conditional-delete=auto; set on or off to skip the probe): " + what, Err: e}
	}
	stale, err := d.write(ctx, "probe", name, name, strings.NewReader("retain probe: first write"), &gcsapi.Conditions{DoesNotExist: true})
	if err != nil {
		return fail("writing", err)
	}
	staleGen, _ := parseGen(stale.Version)
	live, err := d.write(ctx, "probe", name, name, strings.NewReader("retain probe: second write"), nil)
	if err != nil {
		d.removeGens(name, staleGen)
		return fail("rewriting", err)
	}
	liveGen, _ := parseGen(live.Version)
	defer func() {
		if !(s == delByGeneration && o.passed()) {
			// Versions a stale delete did not remove may be left.
			d.removeGens(name, staleGen, liveGen)
		}
	}()
	obj := d.bucket.Object(name)
	o.staleErr = deleteWith(ctx, obj, s, staleGen)
	if o.staleErr != nil && !refused(o.staleErr) {
		return fail("deleting a stale generation of", o.staleErr)
	}
	attrs, err := obj.Attrs(ctx)
	switch {
	case err == nil:
		o.staleKept = attrs.Generation == liveGen
	case !errors.Is(err, gcsapi.ErrObjectNotExist):
		return fail("reading back", err)
	}
	if o.staleKept {
		o.currentErr = deleteWith(ctx, obj, s, liveGen)
		if o.currentErr != nil && !refused(o.currentErr) {
			return fail("deleting the live generation of", o.currentErr)
		}
		_, err = obj.Attrs(ctx)
		switch {
		case errors.Is(err, gcsapi.ErrObjectNotExist):
			o.currentGone = true
		case err != nil:
			return fail("reading back", err)
		}
	}
	return o, nil
}

// removeGens deletes the named generations, ignoring failures: cleanup of
// the probe's scratch object, bounded so that Open cannot hang on it.
func (d *Driver) removeGens(name string, gens ...int64) {
	ctx, cancel := context.WithTimeout(context.Background(), probeCleanupTimeout)
	defer cancel()
	for _, g := range gens {
		if g > 0 {
			d.bucket.Object(name).Generation(g).Delete(ctx)
		}
	}
}
