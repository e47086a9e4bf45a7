package build

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"corral/internal/errdefs"
	"corral/internal/image/store"
	"corral/internal/keylimit"
	"corral/internal/manager"
	"corral/internal/sandbox"
	"corral/pkg/apiv1"
)

// Config is what a Builder needs.
type Config struct {
	Manager *manager.Manager
	Store   *store.Store
	// BaseRootFS is the daemon's Debian base root filesystem directory
	// (built by scripts/deps.sh, its recipe in BaseRootFS + ".stamp"): a
	// debian base without extra packages is this directory as a layer.
	BaseRootFS string
	Log        *slog.Logger
}

// Builder runs builds. It is safe for concurrent use.
type Builder struct {
	cfg Config
	log *slog.Logger

	// locks makes concurrent builds run each step (key) once.
	locks keylimit.Mutex
}

// New returns a Builder.
func New(cfg Config) *Builder {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	return &Builder{cfg: cfg, log: log}
}

// Request is one build.
type Request struct {
	Spec    apiv1.BuildSpec
	Tag     string
	NoCache bool
	// Emit receives progress (step and output events), in order, from the
	// build's goroutine; it must not block for long.
	Emit func(apiv1.BuildEvent)
}

// Validate checks a request without building, so the API can refuse a bad
// one with a 4xx before it starts streaming.
func Validate(req Request) error {
	if req.Tag != "" {
		if _, err := store.ParseRef(req.Tag); err != nil {
			return errdefs.Invalid("tag", "%v", err)
		}
	}
	_, err := validate(req.Spec)
	return err
}

// state is the image a build has so far.
type state struct {
	key    store.Digest
	layers []store.Digest
	config store.ImageConfig
	// fresh is false once a step ran rather than came from the cache.
	fresh bool
}

// Build runs req and returns the image, tagged when req.Tag is set.
func (b *Builder) Build(ctx context.Context, req Request) (store.Image, error) {
	if err := Validate(req); err != nil {
		return store.Image{}, err
	}
	p, _ := validate(req.Spec)
	if req.Emit == nil {
		req.Emit = func(apiv1.BuildEvent) {}
	}
	r := &run{b: b, p: p, req: req, total: len(p.steps)}
	st, err := r.base(ctx)
	if err != nil {
		return store.Image{}, fmt.Errorf("base: %w", err)
	}
	for i, s := range p.steps {
		if st, err = r.step(ctx, i+1, s, st); err != nil {
			return store.Image{}, fmt.Errorf("step %d (%s): %w", i+1, s.name, err)
		}
	}
	return r.finish(st)
}

// run is one build in progress.
type run struct {
	b     *Builder
	p     *plan
	req   Request
	total int
}

func (r *run) emit(ev apiv1.BuildEvent) {
	ev.Steps = r.total
	r.req.Emit(ev)
}

// step applies one step to st.
func (r *run) step(ctx context.Context, n int, s step, st state) (state, error) {
	key := chainKey(st.key, s.canon)
	switch s.kind {
	case kindEnv:
		st.config.Env = sandbox.MergeEnv(st.config.Env, envList(s.def.Env))
		return r.noWork(n, s, st, key), nil
	case kindUser:
		st.config.User = s.def.User
		return r.noWork(n, s, st, key), nil
	}
	unlock := r.b.lock(key)
	defer unlock()
	if !r.req.NoCache {
		if e, ok, err := r.b.cfg.Store.CacheGet(key); err != nil {
			return st, err
		} else if ok {
			r.emit(apiv1.BuildEvent{Type: apiv1.BuildEventStep, Step: n, Name: s.name, Status: apiv1.StepCached, Layer: lastLayer(e.Layers, st.layers)})
			return state{key: key, layers: e.Layers, config: e.Config, fresh: st.fresh}, nil
		}
	}
	start := time.Now()
	r.emit(apiv1.BuildEvent{Type: apiv1.BuildEventStep, Step: n, Name: s.name, Status: apiv1.StepRunning})
	next, err := r.execute(ctx, n, s, st)
	if err != nil {
		ev := apiv1.BuildEvent{Type: apiv1.BuildEventStep, Step: n, Name: s.name, Status: apiv1.StepFailed, Seconds: since(start)}
		var fe *stepFailed
		if asStepFailed(err, &fe) {
			ev.ExitCode = &fe.code
		}
		r.emit(ev)
		return st, err
	}
	next.key, next.fresh = key, false
	if err := r.b.cfg.Store.CachePut(key, store.CacheEntry{Layers: next.layers, Config: next.config}); err != nil {
		return st, err
	}
	r.emit(apiv1.BuildEvent{Type: apiv1.BuildEventStep, Step: n, Name: s.name, Status: apiv1.StepDone, Seconds: since(start), Layer: lastLayer(next.layers, st.layers)})
	return next, nil
}

// noWork finishes a step that only changes configuration: it shows as
// cached while everything before it was.
func (r *run) noWork(n int, s step, st state, key store.Digest) state {
	status := apiv1.StepDone
	if st.fresh {
		status = apiv1.StepCached
	}
	r.emit(apiv1.BuildEvent{Type: apiv1.BuildEventStep, Step: n, Name: s.name, Status: status})
	st.key = key
	return st
}

// execute does a step's work: a copy adds its uploaded layer, the others
// run in a build sandbox.
func (r *run) execute(ctx context.Context, n int, s step, st state) (state, error) {
	if s.kind == kindCopy {
		return r.copyLayer(s, st)
	}
	layer, err := r.inSandbox(ctx, n, s, st)
	if err != nil {
		return st, err
	}
	next := st
	if s.kind == kindWorkdir {
		next.config.Workdir = s.def.Workdir
	}
	if layer != "" {
		next.layers = append(slices.Clip(st.layers), layer)
	}
	return next, nil
}

func (r *run) copyLayer(s step, st state) (state, error) {
	d, err := store.ParseDigest(s.def.Copy.Layer)
	if err != nil {
		return st, err
	}
	if _, err := r.b.cfg.Store.Layer(d); err != nil {
		return st, fmt.Errorf("the copied files' layer %s: %w (upload it first)", d, err)
	}
	if slices.Contains(st.layers, d) {
		return st, errdefs.Invalid("copy", "the same content is already a layer of this image (an identical copy step earlier?)")
	}
	st.layers = append(slices.Clip(st.layers), d)
	return st, nil
}

// finish writes and tags the image.
func (r *run) finish(st state) (store.Image, error) {
	cfg := st.config
	spec := r.p.spec
	if len(spec.Cmd) > 0 {
		cfg.Cmd = spec.Cmd
	}
	if len(spec.Env) > 0 {
		cfg.Env = sandbox.MergeEnv(cfg.Env, envList(spec.Env))
	}
	if spec.Workdir != "" {
		cfg.Workdir = spec.Workdir
	}
	if spec.User != "" {
		cfg.User = spec.User
	}
	if len(st.layers) > store.MaxLayers {
		return store.Image{}, errdefs.Invalid("steps", "the image would have %d layers (at most %d)", len(st.layers), store.MaxLayers)
	}
	img, err := r.b.cfg.Store.PutImage(st.layers, cfg)
	if err != nil {
		return store.Image{}, err
	}
	if r.req.Tag == "" {
		return img, nil
	}
	if err := r.b.cfg.Store.Tag(r.req.Tag, img.Digest); err != nil {
		return store.Image{}, err
	}
	return r.b.cfg.Store.Resolve(string(img.Digest))
}

// lock takes the per-key lock; the returned func releases it.
func (b *Builder) lock(key store.Digest) func() { return b.locks.Lock(string(key)) }

func lastLayer(after, before []store.Digest) string {
	if len(after) > len(before) {
		return string(after[len(after)-1])
	}
	return ""
}

func since(t time.Time) float64 { return time.Since(t).Round(time.Millisecond).Seconds() }
