package deploy

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// cluster is the decoded manifests by kind.
type cluster struct {
	k           kustomization
	deployments []*appsv1.Deployment
	daemonSets  []*appsv1.DaemonSet
	services    []*corev1.Service
	pdbs        []*policyv1.PodDisruptionBudget
	secrets     map[string]*corev1.Secret // the example's, by name
}

func sortObjects(k kustomization, objs, secrets []object) (*cluster, error) {
	c := &cluster{k: k, secrets: map[string]*corev1.Secret{}}
	for _, o := range objs {
		switch v := o.obj.(type) {
		case *appsv1.Deployment:
			c.deployments = append(c.deployments, v)
		case *appsv1.DaemonSet:
			c.daemonSets = append(c.daemonSets, v)
		case *corev1.Service:
			c.services = append(c.services, v)
		case *policyv1.PodDisruptionBudget:
			c.pdbs = append(c.pdbs, v)
		case *corev1.Namespace:
		case *corev1.Secret:
			return nil, fmt.Errorf("%s: Secret %s among the applied resources: the operator makes the Secrets", o.file, v.Name)
		default:
			return nil, fmt.Errorf("%s: a %T the checks do not know", o.file, v)
		}
	}
	for _, o := range secrets {
		s, ok := o.obj.(*corev1.Secret)
		if !ok {
			return nil, fmt.Errorf("%s: a %T, want Secrets only", o.file, o.obj)
		}
		c.secrets[s.Name] = s
	}
	return c, nil
}

// hasKey reports whether the example Secret name documents key.
func (c *cluster) hasKey(name, key string) bool {
	s := c.secrets[name]
	if s == nil {
		return false
	}
	_, inData := s.Data[key]
	_, inString := s.StringData[key]
	return inData || inString
}

// errs collects the disagreements found.
type errs []error

func (e *errs) add(format string, a ...any) { *e = append(*e, fmt.Errorf(format, a...)) }

// check finds every disagreement between the manifests, the example
// Secrets and corral serve's flags.
func (c *cluster) check(spec flagSpec) errs {
	var e errs
	images := map[string]bool{}
	for _, im := range c.k.Images {
		images[im.Name] = true
	}
	if len(c.deployments) != 1 || len(c.daemonSets) != 1 {
		e.add("want one Deployment (the control plane) and one DaemonSet (the nodes), have %d and %d", len(c.deployments), len(c.daemonSets))
		return e
	}
	d, ds := c.deployments[0], c.daemonSets[0]
	c.checkPod(&e, "Deployment "+d.Name, d.Spec.Selector, &d.Spec.Template, spec, images, "control")
	c.checkPod(&e, "DaemonSet "+ds.Name, ds.Spec.Selector, &ds.Spec.Template, spec, images, "node")
	c.checkControl(&e, d)
	c.checkNode(&e, ds)
	dsLabels := labels.Set(ds.Spec.Template.Labels)
	for _, s := range c.services {
		sel := labels.SelectorFromSet(s.Spec.Selector)
		if len(s.Spec.Selector) == 0 || !sel.Matches(labels.Set(d.Spec.Template.Labels)) || sel.Matches(dsLabels) {
			e.add("Service %s: selector %v must pick the control plane's pods %v and not the nodes' %v", s.Name, s.Spec.Selector, d.Spec.Template.Labels, ds.Spec.Template.Labels)
		}
		for _, p := range s.Spec.Ports {
			if _, ok := containerPort(&d.Spec.Template.Spec, p.TargetPort.String()); !ok {
				e.add("Service %s: targetPort %s is no port of the control plane's container", s.Name, p.TargetPort.String())
			}
		}
	}
	for _, p := range c.pdbs {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			e.add("PodDisruptionBudget %s: selector does not pick the control plane's pods (%v)", p.Name, err)
		}
	}
	return e
}

// containerPort resolves a port by name or number in a pod's containers.
func containerPort(pod *corev1.PodSpec, p string) (int32, bool) {
	for _, ct := range pod.Containers {
		for _, cp := range ct.Ports {
			if cp.Name == p || strconv.Itoa(int(cp.ContainerPort)) == p {
				return cp.ContainerPort, true
			}
		}
	}
	return 0, false
}

// envRef is Kubernetes' $(VAR) in args.
var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// sample values the env vars stand for, by where they come from.
func sampleEnv(ct *corev1.Container) map[string]string {
	env := map[string]string{}
	for _, v := range ct.Env {
		switch {
		case v.ValueFrom == nil:
			env[v.Name] = v.Value
		case v.ValueFrom.FieldRef != nil && v.ValueFrom.FieldRef.FieldPath == "status.hostIP":
			env[v.Name] = "10.0.0.11"
		default:
			env[v.Name] = "sample-" + v.Name
		}
	}
	return env
}

// checkPod checks what every workload shares: its selector, references
// to volumes, Secrets and env, its image, the corral serve args of its
// container, the files those args name and the probes.
func (c *cluster) checkPod(e *errs, what string, selector *metav1.LabelSelector, tpl *corev1.PodTemplateSpec, spec flagSpec, images map[string]bool, role string) {
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(tpl.Labels)) {
		e.add("%s: selector %v does not pick its own pods %v (%v)", what, selector, tpl.Labels, err)
	}
	pod := &tpl.Spec
	volumes := map[string]*corev1.Volume{}
	for i, v := range pod.Volumes {
		volumes[v.Name] = &pod.Volumes[i]
		if v.Secret != nil && c.secrets[v.Secret.SecretName] == nil {
			e.add("%s: volume %s: Secret %s is not in %s", what, v.Name, v.Secret.SecretName, secretsExample)
		}
	}
	if len(pod.Containers) != 1 {
		e.add("%s: want one container, have %d", what, len(pod.Containers))
		return
	}
	ct := &pod.Containers[0]
	if !images[ct.Image] {
		e.add("%s: image %s is not among the kustomization's images", what, ct.Image)
	}
	for _, v := range ct.Env {
		if r := v.ValueFrom; r != nil && r.SecretKeyRef != nil && !c.hasKey(r.SecretKeyRef.Name, r.SecretKeyRef.Key) {
			e.add("%s: env %s: Secret %s has no key %s in %s", what, v.Name, r.SecretKeyRef.Name, r.SecretKeyRef.Key, secretsExample)
		}
	}
	env := sampleEnv(ct)
	args := make([]string, len(ct.Args))
	for i, a := range ct.Args {
		args[i] = envRef.ReplaceAllStringFunc(a, func(ref string) string {
			name := envRef.FindStringSubmatch(ref)[1]
			v, ok := env[name]
			if !ok {
				e.add("%s: arg %q uses $(%s), which the container's env does not define", what, a, name)
			}
			return v
		})
	}
	flags, err := parseServe(spec, append(ct.Command, args...))
	if err != nil {
		e.add("%s: %v", what, err)
		return
	}
	if len(flags[role]) != 1 || len(flags["cluster-db-file"]) != 1 || len(flags["cluster-db"]) != 0 {
		e.add("%s: want --%s and --cluster-db-file (the URL with its password on no command line), not --cluster-db, args %q", what, role, ct.Args)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range ct.VolumeMounts {
		if volumes[m.Name] == nil {
			e.add("%s: mount %s names no volume", what, m.Name)
		}
		mounts[m.MountPath] = m
	}
	for _, f := range []string{"cluster-db-file", "join-token-file", "token-file"} {
		for _, p := range flags[f] {
			m, ok := mounts[path.Dir(p)]
			v := volumes[m.Name]
			if !ok || v == nil || v.Secret == nil || len(v.Secret.Items) > 0 || !c.hasKey(v.Secret.SecretName, path.Base(p)) {
				e.add("%s: --%s %s is no key of a Secret mounted at %s", what, f, p, path.Dir(p))
			}
		}
	}
	_, port, err := net.SplitHostPort(last(flags["listen"]))
	if err != nil {
		e.add("%s: --listen %q: %v", what, last(flags["listen"]), err)
	}
	api, ok := containerPort(pod, "api")
	if !ok || strconv.Itoa(int(api)) != port {
		e.add("%s: the port named api (%d) is not --listen's (%s)", what, api, port)
	}
	for name, p := range map[string]*corev1.Probe{"startup": ct.StartupProbe, "readiness": ct.ReadinessProbe, "liveness": ct.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/v1/health" {
			e.add("%s: want a %s probe on GET /v1/health", what, name)
			continue
		}
		if n, ok := containerPort(pod, p.HTTPGet.Port.String()); !ok || n != api {
			e.add("%s: the %s probe's port %s is not the API's", what, name, p.HTTPGet.Port.String())
		}
	}
}

func last(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// checkControl: the control plane is redundant and unprivileged.
func (c *cluster) checkControl(e *errs, d *appsv1.Deployment) {
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		e.add("Deployment %s: want at least 2 replicas", d.Name)
	}
	ps, cs := d.Spec.Template.Spec.SecurityContext, d.Spec.Template.Spec.Containers[0].SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
		e.add("Deployment %s: want runAsNonRoot", d.Name)
	}
	if cs == nil || cs.ReadOnlyRootFilesystem == nil || !*cs.ReadOnlyRootFilesystem ||
		cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation || cs.Privileged != nil && *cs.Privileged {
		e.add("Deployment %s: want a read-only root, no privilege escalation, not privileged", d.Name)
	}
	if d.Spec.Template.Spec.Containers[0].Resources.Requests.Memory().IsZero() {
		e.add("Deployment %s: want resource requests", d.Name)
	}
}

// checkNode: nodes run privileged on labelled hosts, in the host's
// network, with their state on the host at --state-dir, and reachable at
// the address they register.
func (c *cluster) checkNode(e *errs, ds *appsv1.DaemonSet) {
	pod := &ds.Spec.Template.Spec
	ct := &pod.Containers[0]
	if pod.NodeSelector["corral.dev/node"] != "true" {
		e.add("DaemonSet %s: want nodeSelector corral.dev/node=true", ds.Name)
	}
	if !pod.HostNetwork || ct.SecurityContext == nil || ct.SecurityContext.Privileged == nil || !*ct.SecurityContext.Privileged {
		e.add("DaemonSet %s: want hostNetwork and a privileged container", ds.Name)
	}
	if lim := ct.Resources.Limits; !lim.Memory().IsZero() || !lim.Cpu().IsZero() {
		e.add("DaemonSet %s: no limits: the sandboxes run in the container's cgroup", ds.Name)
	}
	var state, address, listen string
	for i, a := range ct.Args {
		for name, dst := range map[string]*string{"--state-dir": &state, "--node-address": &address, "--listen": &listen} {
			if v, ok := cutFlag(ct.Args, i, a, name); ok {
				*dst = v
			}
		}
	}
	hostPath := ""
	for _, m := range ct.VolumeMounts {
		if m.MountPath != state {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.HostPath != nil {
				hostPath = v.HostPath.Path
			}
		}
		if m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationBidirectional {
			e.add("DaemonSet %s: the state dir's mount must propagate both ways (the sandboxes' mounts outlive the container)", ds.Name)
		}
	}
	if state == "" || hostPath != state {
		e.add("DaemonSet %s: --state-dir %q must be a hostPath volume at the same path (%q)", ds.Name, state, hostPath)
	}
	u, err := url.Parse(address)
	_, lport, lerr := net.SplitHostPort(listen)
	if err != nil || u.Scheme != "https" || lerr != nil || u.Port() != lport {
		e.add("DaemonSet %s: --node-address %q must be https (a node's listener serves TLS only) and on --listen's port (%q)", ds.Name, address, listen)
	}
	for name, p := range map[string]*corev1.Probe{"startup": ct.StartupProbe, "readiness": ct.ReadinessProbe, "liveness": ct.LivenessProbe} {
		if p != nil && p.HTTPGet != nil && p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
			e.add("DaemonSet %s: the %s probe must speak HTTPS (the node's listener serves TLS only)", ds.Name, name)
		}
	}
}

// cutFlag returns the value of flag name at args[i] (--name=v or --name v).
func cutFlag(args []string, i int, a, name string) (string, bool) {
	if v, ok := strings.CutPrefix(a, name+"="); ok {
		return v, true
	}
	if a == name && i+1 < len(args) {
		return args[i+1], true
	}
	return "", false
}

func loadCluster(t *testing.T) *cluster {
	t.Helper()
	k, objs, secrets := loadAll(t)
	c, err := sortObjects(k, objs, secrets)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestManifestsAgree: the manifests agree with each other, with the
// example Secrets and with corral serve's flags.
func TestManifestsAgree(t *testing.T) {
	spec := serveFlags(t)
	for _, err := range loadCluster(t).check(spec) {
		t.Error(err)
	}
}

// TestManifestsDisagree: each kind of disagreement the checks look for is
// found.
func TestManifestsDisagree(t *testing.T) {
	spec := serveFlags(t)
	for _, c := range []struct {
		name    string
		breakIt func(*cluster)
	}{
		{"service selects the nodes", func(c *cluster) { c.services[0].Spec.Selector["app.kubernetes.io/component"] = "node" }},
		{"secret key renamed", func(c *cluster) {
			s := c.secrets["corral-join-token"]
			s.StringData["join_token"] = s.StringData["join-token"]
			delete(s.StringData, "join-token")
		}},
		{"unknown flag", func(c *cluster) { c.daemonSets[0].Spec.Template.Spec.Containers[0].Args[1] = "--nodes" }},
		{"undefined env", func(c *cluster) { c.daemonSets[0].Spec.Template.Spec.Containers[0].Env[0].Name = "NODENAME" }},
		{"listen off the api port", func(c *cluster) { c.deployments[0].Spec.Template.Spec.Containers[0].Ports[0].ContainerPort = 9090 }},
		{"node probe over plain HTTP", func(c *cluster) {
			c.daemonSets[0].Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Scheme = corev1.URISchemeHTTP
		}},
		{"node address over plain HTTP", func(c *cluster) {
			args := c.daemonSets[0].Spec.Template.Spec.Containers[0].Args
			for i, a := range args {
				args[i] = strings.Replace(a, "--node-address=https://", "--node-address=http://", 1)
			}
		}},
		{"one replica", func(c *cluster) { one := int32(1); c.deployments[0].Spec.Replicas = &one }},
		{"image not in kustomization", func(c *cluster) { c.deployments[0].Spec.Template.Spec.Containers[0].Image = "corral" }},
	} {
		cl := loadCluster(t)
		c.breakIt(cl)
		if e := cl.check(spec); len(e) == 0 {
			t.Errorf("%s: no disagreement found", c.name)
		} else {
			t.Logf("%s: %v", c.name, e[0])
		}
	}
}
