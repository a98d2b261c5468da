package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/busbar-io/busbar/config"
	"github.com/busbar-io/busbar/console/ops"
	"github.com/busbar-io/busbar/internal/gctune"
	"github.com/busbar-io/busbar/server"
	"github.com/busbar-io/busbar/store/pebble"
)

const serveHelp = `Run the broker.

Usage:
  busbar serve [flags]

Every flag can also be set with an environment variable (shown in brackets);
a flag wins over the variable, and the variable over the config file.

Examples:
  busbar serve
  busbar serve --config Config.json            # the emulator's Config.json works unchanged
  busbar serve --amqp 0.0.0.0:5672 --data /var/lib/busbar
  busbar serve --amqps 127.0.0.1:5671 --tls-self-signed

Flags:
`

type serveFlags struct {
	configPath, dataDir, store, amqpAddr, amqpsAddr, httpAddr string
	nodeID                                                    string
	advertise                                                 string
	leaseTime                                                 time.Duration
	tlsCert, tlsKey                                           string
	consolePipelineDB                                         string
	selfSigned, pprof, httpTLS, console                       bool
	maxMessageKB                                              int64
	pageWindow                                                int
	minFreeMB                                                 int64
	gcHeadroomMB                                              int64
	commitLinger                                              time.Duration
	sku                                                       string
	logLevel, logFormat                                       string
	shutdownTimeout                                           time.Duration
}

// newServeFlagSet declares serve's flags into f, each defaulting to its
// BUSBAR_* environment variable.
func newServeFlagSet(f *serveFlags, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, serveHelp)
		fs.PrintDefaults()
	}
	str := func(p *string, name, env, def, help string) {
		fs.StringVar(p, name, envOr(env, def), help+" ["+env+"]")
	}
	str(&f.configPath, "config", "BUSBAR_CONFIG", "", "configuration file (Busbar's, or the emulator's Config.json)")
	str(&f.dataDir, "data", "BUSBAR_DATA_DIR", "", "data directory (default ./busbar-data)")
	str(&f.store, "store", "BUSBAR_STORE", "", "store URL instead of the data directory's embedded store: postgres://… (a cluster node: several nodes share one database; ?busbar_table=NAME picks the table)")
	str(&f.nodeID, "node-id", "BUSBAR_NODE_ID", "", "with --store postgres://…: this node's id in the cluster (default random)")
	str(&f.advertise, "advertise", "BUSBAR_ADVERTISE", "", "with --store postgres://…: the host:port other nodes reach this node's AMQP listener at, to forward links (default the --amqp address, with the host name for an unspecified host)")
	fs.DurationVar(&f.leaseTime, "lease-time", envDuration("BUSBAR_LEASE_TIME", 0),
		"with --store postgres://…: how long a node that stopped renewing its heartbeat keeps its entities before other nodes take them over (default 5s) [BUSBAR_LEASE_TIME]")
	str(&f.amqpAddr, "amqp", "BUSBAR_AMQP_ADDR", "", "plain AMQP listen address (default 127.0.0.1:5672)")
	str(&f.amqpsAddr, "amqps", "BUSBAR_AMQPS_ADDR", "", "TLS AMQP listen address, e.g. 127.0.0.1:5671 (off by default)")
	str(&f.httpAddr, "http", "BUSBAR_HTTP_ADDR", "", `management and metrics listen address (default 127.0.0.1:5300; "-" disables)`)
	str(&f.tlsCert, "tls-cert", "BUSBAR_TLS_CERT", "", "PEM certificate for TLS listeners")
	str(&f.tlsKey, "tls-key", "BUSBAR_TLS_KEY", "", "PEM private key for TLS listeners")
	str(&f.logLevel, "log-level", "BUSBAR_LOG_LEVEL", "info", "log level: debug, info, warn, error")
	str(&f.logFormat, "log-format", "BUSBAR_LOG_FORMAT", "text", "log format: text or json")
	fs.BoolVar(&f.selfSigned, "tls-self-signed", envBool("BUSBAR_TLS_SELF_SIGNED"),
		"generate (once, in the data directory) a self-signed certificate for localhost, for development [BUSBAR_TLS_SELF_SIGNED]")
	fs.BoolVar(&f.httpTLS, "http-tls", envBool("BUSBAR_HTTP_TLS"), "serve the HTTP listener over TLS [BUSBAR_HTTP_TLS]")
	fs.BoolVar(&f.console, "console", envBoolOr("BUSBAR_CONSOLE", true), "serve the web console under /ui/ on the HTTP listener [BUSBAR_CONSOLE]")
	str(&f.consolePipelineDB, "console-pipeline-db", "BUSBAR_CONSOLE_PIPELINE_DB", "",
		"pipelines whose failed jobs are in PostgreSQL (package pipelinepg), for the console to list and resubmit: postgres://…?busbar_queue=QUEUE[&busbar_table=TABLE], several separated by spaces")
	fs.BoolVar(&f.pprof, "pprof", envBool("BUSBAR_PPROF"), "serve /debug/pprof/ on the HTTP listener [BUSBAR_PPROF]")
	fs.Int64Var(&f.maxMessageKB, "max-message-size-kb", envInt("BUSBAR_MAX_MESSAGE_SIZE_KB", 0),
		"namespace ceiling on message size in KiB (default 1024, at most 102400) [BUSBAR_MAX_MESSAGE_SIZE_KB]")
	fs.IntVar(&f.pageWindow, "page-window", int(envInt("BUSBAR_PAGE_WINDOW", 0)),
		"available messages per queue or subscription kept in memory; the rest of a backlog stays on disk (default 50000; -1: all) [BUSBAR_PAGE_WINDOW]")
	fs.Int64Var(&f.minFreeMB, "min-free-mb", envInt("BUSBAR_MIN_FREE_MB", 0),
		"free space in MiB kept on the data directory's volume: below it sends are refused with the quota error while receives and completions go on (default 128; -1: no check) [BUSBAR_MIN_FREE_MB]")
	fs.Int64Var(&f.gcHeadroomMB, "gc-headroom-mb", envInt("BUSBAR_GC_HEADROOM_MB", gctune.DefaultHeadroom>>20),
		"while the Go heap in use is smaller than this many MiB, let it grow by this much between garbage collections instead of by its own size (less CPU per message for at most this much more memory; -1: Go's default, as does setting GOGC) [BUSBAR_GC_HEADROOM_MB]")
	fs.DurationVar(&f.commitLinger, "commit-linger", envDuration("BUSBAR_COMMIT_LINGER", pebble.DefaultLinger),
		"how long a group commit waits for the callers it just released to commit again before its fsync: longer means fewer fsyncs and less CPU per message at moderate rates, and up to that much more latency (0: no wait) [BUSBAR_COMMIT_LINGER]")
	str(&f.sku, "sku", "BUSBAR_SKU", "Premium", "namespace tier: Premium (1 MB messages by default) or Standard (256 KB messages)")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long SIGTERM waits for in-flight work")
	return fs
}

func serve(args []string, stdout, stderr io.Writer) int {
	var f serveFlags
	fs := newServeFlagSet(&f, stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "busbar serve: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	log, err := newLogger(stderr, f.logLevel, f.logFormat)
	if err != nil {
		fmt.Fprintln(stderr, "busbar serve:", err)
		return exitUsage
	}
	opts, err := f.options(log)
	if err != nil {
		fmt.Fprintln(stderr, "busbar serve:", err)
		return exitError
	}
	gc := gctune.Start(gctune.Options{Headroom: gctune.HeadroomMiB(f.gcHeadroomMB)})
	defer gc.Stop()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	srv, err := server.Start(ctx, opts)
	if err != nil {
		log.Error("cannot start", "err", err)
		return exitError
	}
	log.Info("busbar is running", "version", version, "amqp", srv.AMQPAddr().String(),
		"amqps", addrString(srv.AMQPSAddr()), "http", addrString(srv.HTTPAddr()), "data", opts.DataDir)
	if key, created := srv.RootKey(); key != "" {
		if created {
			fmt.Fprintf(stdout, "Generated a root key, kept in %s.\n", filepath.Join(opts.DataDir, "root-key.json"))
		}
		fmt.Fprintf(stdout, "Connection string:\n  %s\n", srv.ConnectionString())
	}
	if a := srv.HTTPAddr(); a != nil && f.console {
		scheme := "http"
		if f.httpTLS {
			scheme = "https"
		}
		fmt.Fprintf(stdout, "Web console:\n  %s://%s/ui/\n", scheme, a)
	}
	<-ctx.Done()
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), f.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Error("shutdown", "err", err)
		return exitError
	}
	log.Info("stopped")
	return exitOK
}

// commitLinger maps the flag's 0 (no wait) to the store's negative; the
// store's 0 is its default.
func commitLinger(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// options merges flags (already defaulted from the environment) over the
// config file's Busbar section.
func (f serveFlags) options(log *slog.Logger) (server.Options, error) {
	opts := server.Options{Logger: log, EnablePprof: f.pprof, DisableConsole: !f.console, HTTPTLS: f.httpTLS, MaxMessageSizeInKilobytes: f.maxMessageKB, PageWindow: f.pageWindow, MinFreeBytes: f.minFreeMB << 20, CommitLinger: commitLinger(f.commitLinger)}
	switch strings.ToLower(f.sku) {
	case "premium", "":
	case "standard":
		opts.SKU = "Standard"
		// Service Bus Standard: 256 KB messages, not configurable.
		if f.maxMessageKB > standardMaxMessageKB {
			return opts, fmt.Errorf("--max-message-size-kb %d: a Standard namespace allows messages of at most %d KB (use --sku Premium)", f.maxMessageKB, standardMaxMessageKB)
		}
		if f.maxMessageKB == 0 {
			opts.MaxMessageSizeInKilobytes = standardMaxMessageKB
		}
	default:
		return opts, fmt.Errorf("--sku %q: want Standard or Premium", f.sku)
	}
	dbs, err := ops.ParsePipelineDBs(f.consolePipelineDB)
	if err != nil {
		return opts, fmt.Errorf("--console-pipeline-db: %w", err)
	}
	opts.ConsoleToolkit = ops.Toolkit{PipelineDBs: dbs}
	var bb config.Busbar
	if f.configPath != "" {
		cfg, err := config.Load(f.configPath)
		if err != nil {
			return opts, err
		}
		opts.Config = cfg
		if cfg.Busbar != nil {
			bb = *cfg.Busbar
		}
	}
	opts.DataDir = first(f.dataDir, bb.DataDir, server.DefaultDataDir)
	opts.StoreURL = f.store
	opts.Cluster.NodeID, opts.Cluster.LeaseTime, opts.Cluster.Address = f.nodeID, f.leaseTime, f.advertise
	opts.AMQPAddr = first(f.amqpAddr, bb.AMQPAddr, server.DefaultAMQPAddr)
	opts.AMQPSAddr = first(f.amqpsAddr, bb.AMQPSAddr)
	opts.HTTPAddr = first(f.httpAddr, bb.HTTPAddr, server.DefaultHTTPAddr)
	cert, key := first(f.tlsCert, bb.TLSCertFile), first(f.tlsKey, bb.TLSKeyFile)
	switch {
	case cert != "" || key != "":
		if cert == "" || key == "" {
			return opts, errors.New("--tls-cert and --tls-key go together")
		}
		c, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return opts, fmt.Errorf("loading the TLS certificate: %w", err)
		}
		opts.TLS = serverTLS(c)
	case f.selfSigned:
		c, path, err := selfSignedCert(opts.DataDir)
		if err != nil {
			return opts, err
		}
		log.Warn("using a self-signed development certificate; clients must trust it", "cert", path)
		opts.TLS = serverTLS(c)
	}
	if opts.AMQPSAddr != "" && opts.TLS == nil {
		return opts, errors.New("--amqps needs --tls-cert/--tls-key or --tls-self-signed")
	}
	return opts, nil
}

// serverTLS is the TLS configuration of the AMQPS and HTTPS listeners:
// TLS 1.2 or 1.3, and under TLS 1.2 only ephemeral (ECDHE) key exchange with
// AEAD ciphers, so every session has forward secrecy and no CBC-mode suite
// is offered (docs/security.md). TLS 1.3's suites are all AEAD; Go does
// not let them be configured.
func serverTLS(c tls.Certificate) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{c},
		MinVersion:   tls.VersionTLS12,
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		},
	}
}

// standardMaxMessageKB is the message size limit of a Standard namespace.
const standardMaxMessageKB = 256

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	o := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func envBool(name string) bool {
	v, _ := strconv.ParseBool(os.Getenv(name))
	return v
}

func envBoolOr(name string, def bool) bool {
	if v, err := strconv.ParseBool(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func envInt(name string, def int64) int64 {
	if v, err := strconv.ParseInt(os.Getenv(name), 10, 64); err == nil {
		return v
	}
	return def
}

func addrString(a net.Addr) string {
	if a == nil {
		return "off"
	}
	return a.String()
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return v
	}
	return def
}
