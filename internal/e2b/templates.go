package e2b

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"unicode"

	"corral/internal/build"
	"corral/internal/errdefs"
	"corral/internal/manager"
	"corral/internal/sandbox"
	"corral/pkg/apiv1"
)

// BaseTemplate is E2B's default template; BaseImage is the Corral image
// it resolves to, which the daemon builds itself (BaseSpec) at first use.
const (
	BaseTemplate = "base"
	BaseImage    = "e2b/base:latest"
)

// BaseSpec is the E2B-shaped image: Corral's Debian base (which carries
// bash, python3, curl, git and sudo) with E2B's user: "user", uid 1000,
// home /home/user, passwordless sudo, and the default user and workdir of
// its processes. Its steps need no network, and each is cached.
var BaseSpec = apiv1.BuildSpec{
	Base: apiv1.BuildBase{Debian: "bookworm"},
	Steps: []apiv1.BuildStep{{Run: apiv1.StringList{
		"command -v sudo >/dev/null || { echo 'sudo is missing from the base root filesystem: run scripts/deps.sh' >&2; exit 1; }",
		"id -u user >/dev/null 2>&1 || useradd --create-home --uid 1000 --user-group --shell /bin/bash user",
		"printf 'user ALL=(ALL:ALL) NOPASSWD: ALL\\n' >/etc/sudoers.d/user && chmod 0440 /etc/sudoers.d/user",
	}}},
	User:    "user",
	Workdir: "/home/user",
}

// template is what a templateID resolves to: an image or a memory
// snapshot to start from.
type template struct {
	ID           string
	Image        string
	FromSnapshot string
}

// templates resolves templateIDs, building the base template's image
// once per daemon (its steps come from the build cache after the first
// daemon's build).
type templates struct {
	m       *manager.Manager
	builder *build.Builder
	log     *slog.Logger

	mu    sync.Mutex // one base build at a time
	built bool
}

func newTemplates(m *manager.Manager, b *build.Builder, log *slog.Logger) *templates {
	return &templates{m: m, builder: b, log: log}
}

// maxTemplateID bounds a templateID.
const maxTemplateID = 255

// resolve returns what id names: the base template, a memory snapshot
// (id or name) or a Corral image; anything else is a 404 naming it.
func (t *templates) resolve(ctx context.Context, id string) (template, error) {
	if id == "" {
		return template{}, errdefs.Invalid("templateID", "is required")
	}
	if len(id) > maxTemplateID || strings.IndexFunc(id, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }) >= 0 {
		return template{}, errdefs.Invalid("templateID", "%q is not a template name", truncate(id))
	}
	if id == BaseTemplate {
		img, err := t.base(ctx)
		if err != nil {
			return template{}, err
		}
		return template{ID: id, Image: img}, nil
	}
	if sandbox.ValidSnapshotRef(id) && !strings.HasPrefix(id, manager.ReservedTagPrefix) {
		if snap, err := t.m.Snapshots().Get(ctx, id); err == nil {
			return template{ID: id, FromSnapshot: snap.ID}, nil
		} else if !errors.Is(err, errdefs.ErrNotFound) {
			return template{}, err
		}
	}
	if _, err := t.m.Images().Get(id); err == nil {
		return template{ID: id, Image: id}, nil
	} else if !errors.Is(err, errdefs.ErrNotFound) && !errors.Is(err, errdefs.ErrInvalidArgument) && !errors.Is(err, errdefs.ErrNotSupported) {
		return template{}, err
	}
	return template{}, fmt.Errorf("%w: template %q not found (neither a Corral image nor a snapshot)", errdefs.ErrNotFound, truncate(id))
}

// base returns the base template's image, building it if this daemon has
// not yet (a build whose steps are cached takes a moment). Without a
// builder it is Corral's own base image.
func (t *templates) base(ctx context.Context) (string, error) {
	if t.builder == nil {
		return "base", nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.built {
		if _, err := t.m.Images().Get(BaseImage); err == nil {
			return BaseImage, nil
		}
	}
	t.log.Info("building the e2b base template's image", "op", "e2b", "image", BaseImage)
	if _, err := t.builder.Build(context.WithoutCancel(ctx), build.Request{Spec: BaseSpec, Tag: BaseImage}); err != nil {
		return "", fmt.Errorf("building the %q template's image: %w", BaseTemplate, err)
	}
	t.built = true
	return BaseImage, nil
}

// templateTag records the templateID a sandbox was created from (its
// image or snapshot alone does not say "base").
const templateTag = manager.ReservedTagPrefix + "e2b/template"

// templateOf is the templateID a sandbox reports.
func templateOf(sb *sandbox.Sandbox) string {
	if t := sb.Spec.Tags[templateTag]; t != "" {
		return t
	}
	if sb.Spec.FromSnapshot != "" {
		return sb.Spec.FromSnapshot
	}
	return sb.Spec.Image
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
