// Package process is the protobuf code generated (go generate in
// internal/e2b/envd) from Corral's own proto/process/process.proto, wire-compatible
// with E2B envd's process package. It imports nothing of Corral.
package process
