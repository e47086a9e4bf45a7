// Package deploy holds the tests of deploy/: the Kubernetes manifests,
// decoded strictly with the Kubernetes Go types and checked against each
// other and against `corral serve`'s flags, and the systemd units. The
// Kubernetes modules are imported by these tests only, never by the binary.
package deploy
