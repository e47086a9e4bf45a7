// Package e2e drives the real corral binary end to end: a daemon on a
// loopback port with its own state dir, real runsc, the real base root
// filesystem, and the CLI as a user runs it. Needs root; skips without it.
package e2e
