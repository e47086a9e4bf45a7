package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

func newFsWatchCmd() *cobra.Command {
	var (
		recursive bool
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "watch ID PATH",
		Short: "Print the changes in a directory as they happen (TYPE PATH per line; -r: and below it), until interrupted or the directory goes",
		Args:  cobra.ExactArgs(2),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			ws, err := c.Watch(ctx, args[0], args[1], recursive, fsOpts()...)
			if err != nil {
				return err
			}
			defer ws.Close()
			fmt.Fprintf(os.Stderr, "watching %s\n", ws.Path)
			enc := json.NewEncoder(os.Stdout)
			for {
				ev, err := ws.Next()
				if errors.Is(err, io.EOF) || ctx.Err() != nil {
					return nil
				}
				if err != nil {
					return err
				}
				if asJSON {
					_ = enc.Encode(ev)
				} else {
					printWatchEvent(ev)
				}
				if ev.Type == apiv1.WatchEnd {
					if ev.Error != "" {
						return errors.New(ev.Error)
					}
					return nil
				}
			}
		}),
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "watch every directory below PATH too, new ones included")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each event as a JSON line")
	return cmd
}

// printWatchEvent prints one event as "TYPE PATH" (an overflow: how many
// events were lost).
func printWatchEvent(ev apiv1.WatchEvent) {
	switch ev.Type {
	case apiv1.WatchOverflow:
		fmt.Fprintf(os.Stdout, "overflow %d %s\n", ev.Dropped, ev.Error)
	case apiv1.WatchEnd:
	default:
		p := ev.Path
		if ev.Dir {
			p = strings.TrimSuffix(p, "/") + "/"
		}
		fmt.Fprintf(os.Stdout, "%s %s\n", ev.Type, p)
	}
	_ = os.Stdout.Sync()
}
