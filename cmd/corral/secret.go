package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"corral/sdk/go/corral"
)

func newSecretCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secret",
		Short: "Manage secrets: stored sealed by the daemon, given to sandboxes as env (--secret) or injected into their requests at egress (--secret-header)",
	}
	cmd.AddCommand(newSecretCreateCmd(false), newSecretCreateCmd(true), newSecretLsCmd(), newSecretRmCmd())
	return cmd
}

// newSecretCreateCmd is "secret create", or "secret rotate" (which
// replaces an existing secret's values).
func newSecretCreateCmd(rotate bool) *cobra.Command {
	var literals []string
	var envFile string
	use, short := "create NAME (--from-literal K=V ... | --from-env-file FILE)", "Store a secret; its values are never shown again"
	if rotate {
		use, short = "rotate NAME (--from-literal K=V ... | --from-env-file FILE)",
			"Replace all of a secret's values: running sandboxes keep the env they started with; header injection uses the new values from the next request"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			values, err := secretValues(literals, envFile)
			if err != nil {
				return err
			}
			if rotate {
				_, err = c.RotateSecret(ctx, args[0], values)
			} else {
				_, err = c.CreateSecret(ctx, args[0], values)
			}
			if err != nil {
				return err
			}
			fmt.Println(args[0])
			return nil
		}),
	}
	cmd.Flags().StringArrayVar(&literals, "from-literal", nil, "a key and its value, KEY=VALUE (repeatable)")
	cmd.Flags().StringVar(&envFile, "from-env-file", "", "a file of KEY=VALUE lines (blank lines and # comments skipped)")
	return cmd
}

// secretValues reads the values from the flags. Its errors never echo a
// flag or a line: a mistyped one may hold a value.
func secretValues(literals []string, envFile string) (map[string]string, error) {
	if (len(literals) == 0) == (envFile == "") {
		return nil, fmt.Errorf("give either --from-literal (one or more) or --from-env-file")
	}
	values := map[string]string{}
	for i, kv := range literals {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--from-literal number %d: want KEY=VALUE (not shown: it may hold the value)", i+1)
		}
		values[k] = v
	}
	if envFile == "" {
		return values, nil
	}
	b, err := os.ReadFile(envFile)
	if err != nil {
		return nil, fmt.Errorf("--from-env-file: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("--from-env-file line %d: want KEY=VALUE (not shown: it may hold the value)", n)
		}
		values[strings.TrimSpace(k)] = unquote(v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--from-env-file: a line is too long")
	}
	return values, nil
}

// unquote strips one pair of matching quotes around an env file's value.
func unquote(v string) string {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1]
	}
	return v
}

func newSecretLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List secrets: names and keys, never values",
		Args:  cobra.NoArgs,
		RunE: withClient(func(ctx context.Context, c *corral.Client, _ []string) error {
			list, err := c.Secrets(ctx)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tKEYS\tUPDATED")
			for _, s := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, strings.Join(s.Keys, ","), s.UpdatedAt.Local().Format("2006-01-02 15:04:05"))
			}
			return tw.Flush()
		}),
	}
}

func newSecretRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME...",
		Short: "Remove secrets (sandboxes created with one keep their env; header injection from it stops)",
		Args:  cobra.MinimumNArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			for _, n := range args {
				if err := c.RemoveSecret(ctx, n); err != nil {
					return err
				}
				fmt.Println(n)
			}
			return nil
		}),
	}
}
