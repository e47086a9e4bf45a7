package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// kubeDir is deploy/kubernetes, from this package's directory.
const kubeDir = "../../deploy/kubernetes"

// secretsExample is the operator's Secrets, described but not applied.
const secretsExample = "examples/secrets.yaml"

// kustomization is the part of kustomize's Kustomization the manifests
// use; decoded strictly, so a field it does not name fails the test.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace"`
	Resources  []string `json:"resources"`
	Labels     []struct {
		Pairs map[string]string `json:"pairs"`
	} `json:"labels"`
	Images []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
	} `json:"images"`
}

// object is one decoded manifest and where it came from.
type object struct {
	file string
	obj  runtime.Object
}

// decoder decodes YAML strictly (unknown, duplicate or miscased fields
// are errors) into the Kubernetes types of the groups the manifests use;
// another apiVersion or kind is an error too.
func decoder(t *testing.T) runtime.Decoder {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return json.NewSerializerWithOptions(json.DefaultMetaFactory, s, s, json.SerializerOptions{Yaml: true, Strict: true})
}

func readKustomization(t *testing.T) kustomization {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(kubeDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Fatalf("kustomization.yaml is %s %s", k.APIVersion, k.Kind)
	}
	return k
}

// splitDocuments splits multi-document YAML, dropping documents that hold
// nothing but comments.
func splitDocuments(b []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		var v any
		if err := yaml.Unmarshal(doc, &v); err != nil {
			return nil, err
		}
		if v != nil {
			docs = append(docs, doc)
		}
	}
}

// decodeFile decodes every document of a manifest file.
func decodeFile(dec runtime.Decoder, name string, b []byte) ([]object, error) {
	docs, err := splitDocuments(b)
	if err != nil {
		return nil, err
	}
	var objs []object
	for _, doc := range docs {
		obj, _, err := dec.Decode(doc, nil, nil)
		if err != nil {
			return nil, err
		}
		objs = append(objs, object{file: name, obj: obj})
	}
	return objs, nil
}

// loadAll decodes every resource kustomization.yaml lists, then the
// example Secrets.
func loadAll(t *testing.T) (kustomization, []object, []object) {
	t.Helper()
	k := readKustomization(t)
	dec := decoder(t)
	load := func(name string) []object {
		b, err := os.ReadFile(filepath.Join(kubeDir, name))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeFile(dec, name, b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(objs) == 0 {
			t.Fatalf("%s holds no object", name)
		}
		return objs
	}
	var objs []object
	for _, r := range k.Resources {
		objs = append(objs, load(r)...)
	}
	return k, objs, load(secretsExample)
}

// TestManifestsDecodeStrictly: every resource decodes with the Kubernetes
// types, lies in the kustomization's namespace and has a unique name.
func TestManifestsDecodeStrictly(t *testing.T) {
	k, objs, secrets := loadAll(t)
	if k.Namespace == "" {
		t.Fatal("kustomization.yaml sets no namespace")
	}
	seen := map[string]string{}
	for _, o := range append(objs, secrets...) {
		kind := o.obj.GetObjectKind().GroupVersionKind().Kind
		m, ok := o.obj.(interface {
			GetName() string
			GetNamespace() string
		})
		if !ok {
			t.Fatalf("%s: a %s without metadata", o.file, kind)
		}
		key := kind + "/" + m.GetName()
		if prev, dup := seen[key]; dup {
			t.Errorf("%s: %s is also in %s", o.file, key, prev)
		}
		seen[key] = o.file
		if kind == "Namespace" {
			if m.GetName() != k.Namespace {
				t.Errorf("%s: Namespace %s, the kustomization's is %s", o.file, m.GetName(), k.Namespace)
			}
			continue
		}
		if m.GetNamespace() != k.Namespace {
			t.Errorf("%s: %s is in namespace %q, the kustomization's is %q", o.file, key, m.GetNamespace(), k.Namespace)
		}
	}
	for _, want := range []string{"Namespace/" + k.Namespace, "Deployment/corral-control", "Service/corral-control", "DaemonSet/corral-node"} {
		if seen[want] == "" {
			t.Errorf("no %s among the resources", want)
		}
	}
}

// TestMisspeltFieldRejected: the decoder the tests use refuses a misspelt,
// miscased or duplicated field and an unknown kind, so the test above can
// fail.
func TestMisspeltFieldRejected(t *testing.T) {
	dec := decoder(t)
	b, err := os.ReadFile(filepath.Join(kubeDir, "control.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeFile(dec, "control.yaml", b); err != nil {
		t.Fatalf("control.yaml as it is: %v", err)
	}
	for _, c := range []struct{ name, old, new string }{
		{"misspelt", "readinessProbe:", "readinesProbe:"},
		{"miscased", "readOnlyRootFilesystem:", "readOnlyRootFileSystem:"},
		{"duplicated", "replicas: 2", "replicas: 2\n  replicas: 3"},
		{"unknown kind", "kind: PodDisruptionBudget", "kind: PodDisruptionBudgets"},
	} {
		bad := bytes.Replace(b, []byte(c.old), []byte(c.new), 1)
		if bytes.Equal(bad, b) {
			t.Fatalf("%s: control.yaml has no %q", c.name, c.old)
		}
		if _, err := decodeFile(dec, "control.yaml", bad); err == nil {
			t.Errorf("%s field: %q → %q decoded without an error", c.name, c.old, c.new)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
}
