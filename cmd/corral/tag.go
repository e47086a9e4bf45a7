package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"corral/sdk/go/corral"
)

func newTagCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "tag ID KEY=VALUE... | KEY-...",
		Short: "Set (KEY=VALUE) or remove (KEY-) tags of a running or paused sandbox; other tags stay; prints the tags",
		Args:  cobra.MinimumNArgs(2),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			patch, err := tagPatch(args[1:])
			if err != nil {
				return err
			}
			sb, err := c.SetTags(ctx, args[0], patch)
			if err != nil {
				return err
			}
			keys := make([]string, 0, len(sb.Tags))
			for k := range sb.Tags {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(os.Stdout, "%s=%s\n", k, sb.Tags[k])
			}
			return nil
		}),
	}
}

// tagPatch turns KEY=VALUE and KEY- arguments into a merge patch.
func tagPatch(args []string) (map[string]*string, error) {
	patch := map[string]*string{}
	for _, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok && k != "" {
			patch[k] = &v
			continue
		}
		if k, ok := strings.CutSuffix(a, "-"); ok && k != "" {
			patch[k] = nil
			continue
		}
		return nil, fmt.Errorf("%q: want KEY=VALUE to set a tag or KEY- to remove one", a)
	}
	return patch, nil
}
