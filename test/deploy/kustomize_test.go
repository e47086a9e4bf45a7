package deploy

import (
	"os/exec"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// TestKustomizeBuild: where kubectl is installed, `kubectl kustomize`
// builds the directory, its output decodes strictly, and the images and
// labels the kustomization sets reach the workloads.
func TestKustomizeBuild(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed: the kustomize build is not checked")
	}
	out, err := exec.Command(kubectl, "kustomize", kubeDir).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v", err)
	}
	k := readKustomization(t)
	objs, err := decodeFile(decoder(t), "kustomize output", out)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, im := range k.Images {
		want[im.NewName+":"+im.NewTag] = im.Name
	}
	workloads := 0
	for _, o := range objs {
		var tplLabels map[string]string
		var image string
		switch v := o.obj.(type) {
		case *appsv1.Deployment:
			tplLabels, image = v.Spec.Template.Labels, v.Spec.Template.Spec.Containers[0].Image
		case *appsv1.DaemonSet:
			tplLabels, image = v.Spec.Template.Labels, v.Spec.Template.Spec.Containers[0].Image
		default:
			continue
		}
		workloads++
		if want[image] == "" {
			t.Errorf("image %s after the build: not one the kustomization sets", image)
		}
		for _, l := range k.Labels {
			for key, val := range l.Pairs {
				if tplLabels[key] == val {
					t.Errorf("label %s=%s reached a pod template: the kustomization's labels must leave selectors and templates alone", key, val)
				}
			}
		}
	}
	if workloads != 2 {
		t.Errorf("%d workloads after the build, want 2", workloads)
	}
}
