// Package filesystemconnect is the Connect RPC code generated (go generate in
// internal/e2b/envd) for the filesystem service: the handler the envd face
// serves and the client Corral's tests speak with. It imports nothing of
// Corral but its messages.
package filesystemconnect
