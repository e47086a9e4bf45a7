package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

func newImagePruneCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "prune",
		Short: "Remove untagged images no sandbox uses, and unused layers; say what was kept and why",
		Args:  cobra.NoArgs,
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			rep, err := c.PruneImages(ctx)
			if err != nil {
				return err
			}
			printPrune(os.Stdout, rep, time.Now())
			return nil
		}),
	}
}

// maxKeptLines bounds the items printed one by one for each reason.
const maxKeptLines = 10

// printPrune writes what a prune removed, then what it kept: tagged images
// and the layers kept images use as counts, and each image or layer kept
// for being in use or too young on a line of its own.
func printPrune(w io.Writer, rep apiv1.PruneReport, now time.Time) {
	fmt.Fprintf(w, "removed %d images and %d layers, freed %d MiB\n", len(rep.Images), len(rep.Layers), rep.Bytes>>20)
	count := map[string]int{}
	var inUse, recent []apiv1.PruneKept
	for _, k := range rep.Kept {
		count[k.Kind+"/"+k.Reason]++
		switch k.Reason {
		case "in_use":
			inUse = append(inUse, k)
		case "recent":
			recent = append(recent, k)
		}
	}
	if n := count["image/tagged"]; n > 0 {
		fmt.Fprintf(w, "kept %s: tagged (corral image rm untags)\n", plural(n, "image"))
	}
	if n := count["layer/used"]; n > 0 {
		fmt.Fprintf(w, "kept %s: used by kept images\n", plural(n, "layer"))
	}
	for i, k := range inUse {
		if i == maxKeptLines {
			fmt.Fprintf(w, "kept %d more in use\n", len(inUse)-i)
			break
		}
		fmt.Fprintf(w, "kept %s %s: in use, %s\n", k.Kind, shortDigest(k.Digest), k.Detail)
	}
	for i, k := range recent {
		if i == maxKeptLines {
			fmt.Fprintf(w, "kept %d more too recent to prune\n", len(recent)-i)
			break
		}
		when := ""
		if k.Until != nil {
			when = fmt.Sprintf(" (prunable in %s)", max(k.Until.Sub(now), 0).Round(time.Second))
		}
		fmt.Fprintf(w, "kept %s %s: %s%s\n", k.Kind, shortDigest(k.Digest), k.Detail, when)
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
