// Package deps holds the tests that keep Corral's shape: an allowlist of
// every package's imports, the leaf packages' third-party imports, and a
// doc comment on every package.
package deps
