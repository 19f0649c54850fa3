// Command xupfctl is the command-line client of xupfd's HTTP API.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/config"
)

const (
	defaultServer = "http://127.0.0.1:8080"
	serverEnv     = "XUPF_SERVER"
	tokenFileEnv  = "XUPF_TOKEN_FILE"
	caCertEnv     = "XUPF_CA_CERT"
)

var outputFormats = []string{"table", "json", "yaml"}

func main() {
	// Ctrl-C cancels the request in flight instead of leaving it to the timeout.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// run executes xupfctl with args and returns the process exit code. Everything it depends on
// from the process is a parameter, so tests run the real command tree.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	root := newRootCmd(getenv)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "error: %s\n", message(err.Error())) // it may quote the daemon
		return 1
	}
	return 0
}

// options are the root's persistent flags, shared by every command.
type options struct {
	server    string
	tokenFile string
	caCert    string
	output    string
	timeout   time.Duration
	// http is the client for an https server with --ca-cert; nil: Go's default.
	http *http.Client
}

func newRootCmd(getenv func(string) string) *cobra.Command {
	opts := &options{}
	root := &cobra.Command{
		Use:   "xupfctl",
		Short: "Inspect and configure a running xupfd: status, sessions, PFCP associations, traffic classes, policer contracts, routes and counters",
		Long: `xupfctl talks to the HTTP API of xupfd, the xupf user-plane daemon: it shows its
state, its PDU sessions, its PFCP associations with SMFs and the XDP datapath's counters,
and configures the traffic classifier's classes, the policer's contracts and, in the
router's private mode, the routes and neighbours. "xupfctl pfcp
session" instead acts as a minimal SMF toward a UPF's PFCP endpoint, to create, modify and
delete sessions.

The daemon's API address is --server, else the ` + serverEnv + ` environment variable, else
` + defaultServer + `. Every request carries the API token that xupfd keeps in its
api_token_file: xupfctl reads it from --token-file, else ` + tokenFileEnv + `, else
` + config.DefaultAPITokenFile + ` (readable by root only, so run xupfctl with sudo or as
the daemon's user, or give a copy of your own). An https:// server's certificate is checked
against the system's CAs, or the PEM file --ca-cert (env ` + caCertEnv + `).

Shell completion (including session ids for "session show" and class ids for
"classifier show" and "classifier delete") is built in: run
"xupfctl completion --help" and pick your shell.`,
		Example: `  xupfctl status
  xupfctl session list -o json
  xupfctl session show 7
  xupfctl pfcp associations
  xupfctl pfcp session create --upf 192.0.2.1 --count 10 --ue-pool 10.45.0.0/16 --gnb 192.0.2.100
  xupfctl classifier add --id 3 --priority 100 --protocol udp --dst-port 5060
  xupfctl classifier list
  xupfctl policer set --class 3 --limit --rate 10mbit --burst 64kb
  xupfctl route add 0.0.0.0/0 --via 203.0.113.1 --dev n6
  ` + serverEnv + `=http://192.0.2.5:8080 xupfctl stats
  source <(xupfctl completion bash)`,
		// Errors are printed once, by run, in a single format.
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			// Flags and arguments have been parsed by now: what fails from here on is not a
			// matter of usage, and the usage text would bury the message.
			cmd.SilenceUsage = true
			return opts.validate()
		},
	}

	server := getenv(serverEnv)
	if server == "" {
		server = defaultServer
	}
	flags := root.PersistentFlags()
	flags.StringVar(&opts.server, "server", server,
		"xupfd API address, as http://host:port or https://host:port (env "+serverEnv+")")
	tokenFile := getenv(tokenFileEnv)
	if tokenFile == "" {
		tokenFile = config.DefaultAPITokenFile
	}
	flags.StringVar(&opts.tokenFile, "token-file", tokenFile,
		"file holding the API token, xupfd's api_token_file (env "+tokenFileEnv+")")
	flags.StringVar(&opts.caCert, "ca-cert", getenv(caCertEnv),
		"PEM file of the CA that signed an https:// server's certificate, or that certificate if self-signed (env "+caCertEnv+")")
	flags.StringVarP(&opts.output, "output", "o", "table",
		"output format: "+strings.Join(outputFormats, ", "))
	flags.DurationVar(&opts.timeout, "timeout", 5*time.Second,
		"how long to wait for the daemon's answer (the UPF's, for pfcp session)")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputFormats, cobra.ShellCompDirectiveNoFileComp))

	root.AddCommand(newStatusCmd(opts), newSessionCmd(opts), newClassifierCmd(opts), newPolicerCmd(opts),
		newRouteCmd(opts), newNeighCmd(opts), newFlowsCmd(opts), newPFCPCmd(opts), newStatsCmd(opts), newConfigCmd(opts))
	return root
}

func (o *options) validate() error {
	switch o.output {
	case "table", "json", "yaml":
	default:
		return fmt.Errorf("output format %q is not supported; use table, json or yaml", o.output)
	}
	if o.timeout <= 0 {
		return fmt.Errorf("--timeout %s must be positive, e.g. 5s", o.timeout)
	}
	if o.caCert != "" {
		tlsCfg, err := api.TLSConfig(o.caCert)
		if err != nil {
			return fmt.Errorf("--ca-cert: %w", err)
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tlsCfg
		o.http = &http.Client{Transport: tr}
	}
	return nil
}

// client returns an API client for --server and a context bounded by --timeout.
func (o *options) client(cmd *cobra.Command) (*api.Client, context.Context, context.CancelFunc) {
	server := o.server
	// "127.0.0.1:8080" is what people type; without a scheme it would fail with an obscure
	// URL parse error.
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	ctx := cmd.Context()
	if ctx == nil { // completion runs commands without a context
		ctx = context.Background()
	}
	if u, err := url.Parse(server); err == nil && u.Scheme == "http" && !api.IsLoopbackHost(u.Hostname()) {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: the API token goes to %s in clear, readable on the way; "+
			"serve the API over HTTPS (api_tls_cert) and use https://\n", message(u.Host))
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	return api.NewClient(server, o.http).WithTokenFile(o.tokenFile), ctx, cancel
}

// render writes v as JSON or YAML when -o asks for it, else as the command's table.
func (o *options) render(w io.Writer, v any, table func(io.Writer) error) error {
	switch o.output {
	case "json":
		return writeJSON(w, v)
	case "yaml":
		return writeYAML(w, v)
	default:
		return table(w)
	}
}

func writeJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("writing json: %w", err)
	}
	if _, err := w.Write(escapeJSON(buf.Bytes())); err != nil {
		return fmt.Errorf("writing json: %w", err)
	}
	return nil
}

func writeYAML(w io.Writer, v any) error {
	var root yaml.Node
	if err := root.Encode(v); err != nil {
		return fmt.Errorf("writing yaml: %w", err)
	}
	return writeYAMLNode(w, &root)
}

// writeYAMLNode writes a YAML node tree, its comments kept, escaped as writeYAML's.
func writeYAMLNode(w io.Writer, root *yaml.Node) error {
	quoteUnprintable(root)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return fmt.Errorf("writing yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("writing yaml: %w", err)
	}
	if _, err := w.Write(escapeYAML(buf.Bytes())); err != nil {
		return fmt.Errorf("writing yaml: %w", err)
	}
	return nil
}

// flush ends a tabwriter table; its error is the first write error, e.g. a closed stdout.
func flush(tw *tabwriter.Writer) error {
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return nil
}

// newTable returns the tabwriter every table uses, so they all look alike.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}
