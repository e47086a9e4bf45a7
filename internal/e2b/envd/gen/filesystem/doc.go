// Package filesystem is the protobuf code generated (go generate in
// internal/e2b/envd) from Corral's own proto/filesystem/filesystem.proto, wire-compatible
// with E2B envd's filesystem package. It imports nothing of Corral.
package filesystem
