package build

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"corral/internal/errdefs"
	"corral/internal/image/dirtar"
	"corral/internal/image/oci"
	"corral/internal/image/store"
	"corral/pkg/apiv1"
)

// mmdebstrapTimeout bounds building a Debian base with extra packages.
const mmdebstrapTimeout = 20 * time.Minute

// Defaults of the Debian recipe, used when the base root filesystem has no
// stamp (scripts/deps.sh writes one with the recipe it used).
const (
	defaultVariant = "minbase"
	defaultInclude = "python3,ca-certificates,curl,git,procps"
)

// base resolves the spec's base into the build's first state.
func (r *run) base(ctx context.Context) (state, error) {
	b := r.p.spec.Base
	if b.Debian != "" {
		return r.debianBase(ctx, b)
	}
	return r.imageBase(ctx, b)
}

// imageBase starts from a Corral image, pulling it from its registry when
// the store has no image of that name.
func (r *run) imageBase(ctx context.Context, b apiv1.BuildBase) (state, error) {
	name := "image " + b.Image
	img, err := r.b.cfg.Store.Resolve(b.Image)
	status := apiv1.StepCached
	if errors.Is(err, errdefs.ErrNotFound) || errors.Is(err, errdefs.ErrInvalidArgument) {
		start := time.Now()
		r.emit(apiv1.BuildEvent{Type: apiv1.BuildEventStep, Name: name, Status: apiv1.StepRunning})
		img, err = oci.Pull(ctx, r.b.cfg.Store, b.Image, oci.PullOptions{Insecure: b.Insecure})
		if err != nil {
			r.emit(apiv1.BuildEvent{Type: apiv1.BuildEventStep, Name: name, Status: apiv1.StepFailed, Seconds: since(start)})
			return state{}, fmt.Errorf("%s is neither an image here nor one its registry serves: %w", truncate(b.Image), err)
		}
		status = apiv1.StepDone
	} else if err != nil {
		return state{}, err
	}
	r.emit(apiv1.BuildEvent{Type: apiv1.BuildEventStep, Name: name, Status: status})
	return state{key: baseKey("image " + string(img.Digest)), layers: img.Layers, config: img.Config, fresh: true}, nil
}

// recipe is how a Debian base is made.
type recipe struct {
	suite, variant, include, mirror string
	// stamp is the base root filesystem's recipe as deps.sh recorded it.
	stamp string
}

func (r *run) recipe(b apiv1.BuildBase) recipe {
	rc := recipe{suite: b.Debian, variant: defaultVariant, include: defaultInclude}
	raw, err := os.ReadFile(r.b.cfg.BaseRootFS + ".stamp")
	if err != nil {
		return rc
	}
	rc.stamp = strings.TrimSpace(string(raw))
	for _, f := range strings.Fields(rc.stamp) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "variant":
			rc.variant = v
		case "include":
			rc.include = v
		case "mirror":
			if v != "default" {
				rc.mirror = v
			}
		}
	}
	return rc
}

// debianBase is the daemon's base root filesystem as a layer, or, with
// extra packages, a root filesystem mmdebstrap builds from the same
// recipe plus those packages.
func (r *run) debianBase(ctx context.Context, b apiv1.BuildBase) (state, error) {
	rc := r.recipe(b)
	pkgs := slices.Sorted(slices.Values(b.Packages))
	pkgs = slices.Compact(pkgs)
	name := "debian:" + b.Debian
	if len(pkgs) > 0 {
		name += " +" + strings.Join(pkgs, ",")
	}
	name = truncateTo(name, maxNameLen)
	key := baseKey(fmt.Sprintf("debian suite=%s recipe=%q packages=%s", rc.suite, rc.stamp, strings.Join(pkgs, ",")))
	unlock := r.b.lock(key)
	defer unlock()
	if !r.req.NoCache {
		if e, ok, err := r.b.cfg.Store.CacheGet(key); err != nil {
			return state{}, err
		} else if ok {
			r.emit(apiv1.BuildEvent{Type: apiv1.BuildEventStep, Name: name, Status: apiv1.StepCached, Layer: string(e.Layers[0])})
			return state{key: key, layers: e.Layers, config: e.Config, fresh: true}, nil
		}
	}
	start := time.Now()
	r.emit(apiv1.BuildEvent{Type: apiv1.BuildEventStep, Name: name, Status: apiv1.StepRunning})
	layer, err := r.debianLayer(ctx, rc, pkgs)
	if err != nil {
		r.emit(apiv1.BuildEvent{Type: apiv1.BuildEventStep, Name: name, Status: apiv1.StepFailed, Seconds: since(start)})
		return state{}, err
	}
	if err := r.b.cfg.Store.CachePut(key, store.CacheEntry{Layers: []store.Digest{layer}}); err != nil {
		return state{}, err
	}
	r.emit(apiv1.BuildEvent{Type: apiv1.BuildEventStep, Name: name, Status: apiv1.StepDone, Seconds: since(start), Layer: string(layer)})
	return state{key: key, layers: []store.Digest{layer}, fresh: false}, nil
}

func (r *run) debianLayer(ctx context.Context, rc recipe, pkgs []string) (store.Digest, error) {
	if len(pkgs) == 0 {
		if r.b.cfg.BaseRootFS == "" {
			return "", fmt.Errorf("%w: this daemon has no base root filesystem", errdefs.ErrNotSupported)
		}
		return r.dirLayer(ctx, r.b.cfg.BaseRootFS)
	}
	dir, err := os.MkdirTemp(r.b.cfg.Store.Root()+"/tmp", "debian-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	root := dir + "/rootfs"
	if err := r.mmdebstrap(ctx, rc, pkgs, root); err != nil {
		return "", err
	}
	return r.dirLayer(ctx, root)
}

// mmdebstrap builds a root filesystem into dir, its output streamed as the
// base's output.
func (r *run) mmdebstrap(ctx context.Context, rc recipe, pkgs []string, dir string) error {
	ctx, cancel := context.WithTimeout(ctx, mmdebstrapTimeout)
	defer cancel()
	include := rc.include
	if include != "" {
		include += ","
	}
	include += strings.Join(pkgs, ",")
	args := []string{"--quiet", "--variant=" + rc.variant, "--include=" + include, "--skip=output/dev", rc.suite, dir}
	if rc.mirror != "" {
		args = append(args, rc.mirror)
	}
	cmd := exec.CommandContext(ctx, "mmdebstrap", args...)
	cmd.WaitDelay = 5 * time.Second
	out := &emitWriter{r: r, stream: "stderr"}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("mmdebstrap: %w (%w)", err, ctx.Err())
		}
		return fmt.Errorf("%w: mmdebstrap could not build the base (is every package in %s?): %v", errdefs.ErrFailedPrecondition, rc.suite, err)
	}
	return nil
}

// dirLayer stores a root filesystem directory as a layer.
func (r *run) dirLayer(ctx context.Context, dir string) (store.Digest, error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		st, err := dirtar.Write(pw, dir, "/", dirtar.Options{})
		if err == nil && len(st.Skipped) > 0 {
			r.b.log.Debug("left out of a base layer", "dir", dir, "skipped", st.Skipped)
		}
		pw.CloseWithError(err)
		done <- err
	}()
	layer, err := r.b.cfg.Store.AddLayer(ctx, pr, "")
	pr.CloseWithError(errors.New("layer store stopped reading"))
	if werr := <-done; werr != nil {
		return "", fmt.Errorf("reading %s: %w", dir, werr)
	}
	if err != nil {
		return "", err
	}
	return layer.Digest, nil
}

// emitWriter turns a command's output into output events of the base.
type emitWriter struct {
	r      *run
	stream string
}

func (w *emitWriter) Write(p []byte) (int, error) {
	w.r.emit(apiv1.BuildEvent{Type: apiv1.BuildEventOutput, Stream: w.stream, Data: append([]byte(nil), p...)})
	return len(p), nil
}
