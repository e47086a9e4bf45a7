package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"corral/sdk/go/corral"
)

// client returns the API client configured from the environment.
func client() (*corral.Client, error) { return corral.FromEnv() }

// cmdContext is cancelled by SIGINT/SIGTERM.
func cmdContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
