package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"
)

func newConfigCmd(opts *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show the daemon's running configuration",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q for %q; use show", args[0], cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newConfigShowCmd(opts))
	return cmd
}

func newConfigShowCmd(opts *options) *cobra.Command {
	return &cobra.Command{
		Use:   "show",
		Short: "Print the running configuration as a configuration file xupfd accepts",
		Long: `Print the configuration the daemon runs with, as YAML that xupfd accepts as its
configuration file: the file's settings with their defaults filled in, and the traffic
classes and policer contracts as they are now (the API may have changed them since the
start). Save it to restart the daemon with what it runs now. It holds no secret: the API
token's file is named, never read. The output is YAML whatever --output says.`,
		Example: `  xupfctl config show > xupfd.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, cancel := opts.client(cmd)
			defer cancel()
			data, err := c.RunningConfig(ctx)
			if err != nil {
				return err
			}
			// Through a node, so that it is printed as every other YAML output: anything
			// unprintable quoted and escaped, the daemon's comments kept.
			var doc yaml.Node
			if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
				return fmt.Errorf("the daemon's configuration is not YAML (is --server the xupfd API address?): %v", err)
			}
			return writeYAMLNode(cmd.OutOrStdout(), &doc)
		},
	}
}
