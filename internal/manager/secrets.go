package manager

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"corral/internal/errdefs"
	"corral/internal/records"
	"corral/internal/sandbox"
	"corral/internal/secrets"
)

// Secrets: the manager validates and stores them (records seals the
// values), resolves a spec's or a process's secret names to values at
// create or exec (missing: not found), and answers the egress proxy with a
// live sandbox's header rules, its CA and the current values.

// CreateSecret stores a new secret.
func (m *Manager) CreateSecret(ctx context.Context, name string, values map[string]string) (records.SecretInfo, error) {
	if err := secrets.ValidateName("name", name); err != nil {
		return records.SecretInfo{}, err
	}
	if err := secrets.ValidateValues("values", values); err != nil {
		return records.SecretInfo{}, err
	}
	return m.secretStore().CreateSecret(ctx, name, secrets.Keys(values), values)
}

// RotateSecret replaces an existing secret's values. Running sandboxes'
// processes keep the env they started with (and new processes of a
// sandbox created with it get the values it was created with); header
// injection reads the new values at the next request.
func (m *Manager) RotateSecret(ctx context.Context, name string, values map[string]string) (records.SecretInfo, error) {
	if err := secrets.ValidateName("name", name); err != nil {
		return records.SecretInfo{}, err
	}
	if err := secrets.ValidateValues("values", values); err != nil {
		return records.SecretInfo{}, err
	}
	return m.secretStore().RotateSecret(ctx, name, secrets.Keys(values), values)
}

// DeleteSecret removes a secret.
func (m *Manager) DeleteSecret(ctx context.Context, name string) error {
	if err := secrets.ValidateName("name", name); err != nil {
		return err
	}
	return m.secretStore().DeleteSecret(ctx, name)
}

// GetSecret returns a secret's name and keys.
func (m *Manager) GetSecret(ctx context.Context, name string) (records.SecretInfo, error) {
	if err := secrets.ValidateName("name", name); err != nil {
		return records.SecretInfo{}, err
	}
	return m.secretStore().SecretInfo(ctx, name)
}

// ListSecrets lists every secret's name and keys.
func (m *Manager) ListSecrets(ctx context.Context) ([]records.SecretInfo, error) {
	return m.secretStore().ListSecrets(ctx)
}

// secretEnv is the env of secrets names, in order (a later secret's key
// replaces an earlier one's).
func (m *Manager) secretEnv(ctx context.Context, field string, names []string) (map[string]string, error) {
	if err := secrets.ValidateNames(field, names); err != nil {
		return nil, err
	}
	var env map[string]string
	for _, n := range names {
		v, err := m.secretStore().SecretValues(ctx, n)
		if err != nil {
			return nil, err
		}
		if env == nil {
			env = map[string]string{}
		}
		maps.Copy(env, v)
	}
	return env, nil
}

// resolveSecrets fills a new spec's SecretEnv from its Secrets and checks
// that each header rule names a secret and key that exist.
func (m *Manager) resolveSecrets(ctx context.Context, spec *sandbox.Spec) error {
	if len(spec.Secrets) > 0 {
		env, err := m.secretEnv(ctx, "secrets", spec.Secrets)
		if err != nil {
			return err
		}
		spec.SecretEnv = env
	}
	if len(spec.SecretHeaders) > 0 && spec.Network.BlockNetwork {
		return errdefs.Invalid("secret_headers", "the sandbox has no network (block_network, or a daemon without networking) to inject into")
	}
	for i, r := range spec.SecretHeaders {
		v, err := m.secretStore().SecretValues(ctx, r.Secret)
		if err != nil {
			return fmt.Errorf("secret_headers[%d]: %w", i, err)
		}
		if _, ok := v[r.Key]; !ok {
			return fmt.Errorf("%w: secret_headers[%d]: secret %s has no key %s", errdefs.ErrNotFound, i, r.Secret, r.Key)
		}
	}
	return nil
}

// usesSecrets: a spec a warm pool's sandbox cannot serve (its processes,
// trust store and egress rules are fixed when it starts).
func usesSecrets(spec sandbox.Spec) bool {
	return len(spec.Secrets) > 0 || len(spec.SecretHeaders) > 0
}

// secretCAs caches each live sandbox's egress CA.
type secretCAs struct {
	mu  sync.Mutex
	cas map[string]*secrets.CA
}

// drop forgets sandbox id's CA (it ended).
func (c *secretCAs) drop(id string) {
	c.mu.Lock()
	delete(c.cas, id)
	c.mu.Unlock()
}

// sandboxCA returns the egress CA of sandbox rec (derived, so the same
// after a restart).
func (m *Manager) sandboxCA(rec *sandbox.Sandbox) (*secrets.CA, error) {
	m.cas.mu.Lock()
	defer m.cas.mu.Unlock()
	if ca, ok := m.cas.cas[rec.ID]; ok {
		return ca, nil
	}
	ca, err := secrets.NewCA(m.cfg.SecretCASeed, rec.ID, rec.CreatedAt)
	if err != nil {
		return nil, err
	}
	if m.cas.cas == nil {
		m.cas.cas = map[string]*secrets.CA{}
	}
	m.cas.cas[rec.ID] = ca
	return ca, nil
}

// secretCAPEMs is the CA a sandbox with header rules trusts, or nothing.
func (m *Manager) secretCAPEMs(rec *sandbox.Sandbox) ([]string, error) {
	if len(rec.Spec.SecretHeaders) == 0 {
		return nil, nil
	}
	ca, err := m.sandboxCA(rec)
	if err != nil {
		return nil, err
	}
	return []string{ca.PEM()}, nil
}

// EgressRules are what the egress proxy intercepts for a live sandbox.
type EgressRules struct {
	Hosts []string
	CA    *secrets.CA
	rules []secrets.HeaderRule
}

// SecretEgress returns live sandbox id's header rules and CA; ok is false
// for a sandbox without rules.
func (m *Manager) SecretEgress(id string) (EgressRules, bool) {
	h := m.lookup(id)
	if h == nil {
		return EgressRules{}, false
	}
	rec := h.Record()
	if len(rec.Spec.SecretHeaders) == 0 {
		return EgressRules{}, false
	}
	ca, err := m.sandboxCA(rec)
	if err != nil {
		m.log.Warn("deriving a sandbox's egress CA", "sandbox", id, "err", err)
		return EgressRules{}, false
	}
	out := EgressRules{CA: ca, rules: rec.Spec.SecretHeaders}
	for _, r := range rec.Spec.SecretHeaders {
		if !slices.Contains(out.Hosts, r.Host) {
			out.Hosts = append(out.Hosts, r.Host)
		}
	}
	return out, true
}

// SecretHeader is one header to inject, value included.
type SecretHeader struct{ Name, Value string }

// Headers reads, now, the values of the rules for a request over TLS to
// host on port with method. The error names the secret and key, never a
// value.
func (m *Manager) Headers(ctx context.Context, e EgressRules, host string, port int, method string) ([]SecretHeader, error) {
	var out []SecretHeader
	for _, r := range e.rules {
		if r.Host != host || !r.Allows(port, method) {
			continue
		}
		vals, err := m.secretStore().SecretValues(ctx, r.Secret)
		if err != nil {
			return nil, fmt.Errorf("secret %s: %w", r.Secret, err)
		}
		v, ok := vals[r.Key]
		if !ok {
			return nil, fmt.Errorf("secret %s has no key %s", r.Secret, r.Key)
		}
		hv, ok := r.Value(v)
		if !ok {
			return nil, fmt.Errorf("secret %s key %s holds a line break: not a header value", r.Secret, r.Key)
		}
		out = append(out, SecretHeader{Name: r.Header, Value: hv})
	}
	return out, nil
}

// RecordInjection adds an egress injection report to a sandbox's events:
// headers set, a request refused (errMsg), or requests to a ruled host
// sent on without the secret (skipped: plain HTTP, or a port or method no
// rule allows).
func (m *Manager) RecordInjection(id, host string, headers []string, count int, errMsg, skipped string) {
	fields := map[string]string{"host": host, "headers": strings.Join(headers, ","), "requests": strconv.Itoa(count)}
	if skipped != "" {
		fields["reason"] = skipped
		m.event(id, "egress_inject_skipped", "sent requests to "+host+" without its secret headers: "+skipped, fields)
		return
	}
	if errMsg != "" {
		fields["error"] = errMsg
		m.event(id, "egress_inject_refused", "refused a request to "+host+": "+errMsg, fields)
		return
	}
	m.event(id, "egress_injected", "set "+fields["headers"]+" on requests to "+host, fields)
}

// SecretInfo is what may be shown of a secret (never a value).
type SecretInfo = records.SecretInfo
