package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/console/ops"
	"github.com/busbar-io/busbar/server"
	"github.com/busbar-io/busbar/store/pebble"
)

// TestTLSWithCustomEndpoint: a connection string without
// UseDevelopmentEmulator works against the AMQPS listener through the SDK's
// CustomEndpoint, trusting the self-signed development certificate.
func TestTLSWithCustomEndpoint(t *testing.T) {
	dir := t.TempDir()
	cert, certPath, err := selfSignedCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.Start(context.Background(), server.Options{
		DataDir: dir, AMQPAddr: "127.0.0.1:0", AMQPSAddr: "127.0.0.1:0", HTTPAddr: "-",
		TLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Broker().CreateQueue(ctx, "secure", broker.QueueProperties{}); err != nil {
		t.Fatal(err)
	}

	pemBytes, err := os.ReadFile(certPath)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pemBytes) {
		t.Fatal("dev certificate is not PEM")
	}
	key, _ := srv.RootKey()
	// The namespace name is what the token audiences and TLS server name use.
	conn := "Endpoint=sb://localhost/;SharedAccessKeyName=" + server.RootKeyName + ";SharedAccessKey=" + key
	c, err := azservicebus.NewClientFromConnectionString(conn, &azservicebus.ClientOptions{
		CustomEndpoint: srv.AMQPSAddr().String(),
		TLSConfig:      &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	s, err := c.NewSender("secure", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("over tls")}, nil); err != nil {
		t.Fatalf("SendMessage over TLS: %v", err)
	}
	r, err := c.NewReceiverForQueue("secure", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "over tls" {
		t.Fatalf("ReceiveMessages over TLS = %v, %v", msgs, err)
	}

	// The same certificate is reused on the next start, not regenerated.
	again, _, err := selfSignedCert(dir)
	if err != nil || string(again.Certificate[0]) != string(cert.Certificate[0]) {
		t.Fatalf("selfSignedCert regenerated the certificate (err %v)", err)
	}
}

// TestServeOptionsPrecedence: flags win over BUSBAR_* variables, which win
// over the config file's Busbar section, which wins over the defaults.
func TestServeOptionsPrecedence(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "busbar.json")
	if err := os.WriteFile(cfgPath, []byte(`{"Busbar": {"AmqpAddr": "127.0.0.1:7001", "HttpAddr": "127.0.0.1:7002", "DataDir": "`+dir+`/from-config"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BUSBAR_HTTP_ADDR", "127.0.0.1:7102")
	var f serveFlags
	fs := newServeFlagSet(&f, os.Stderr)
	if err := fs.Parse([]string{"--config", cfgPath, "--amqp", "127.0.0.1:7201"}); err != nil {
		t.Fatal(err)
	}
	opts, err := f.options(nil)
	if err != nil {
		t.Fatal(err)
	}
	if opts.AMQPAddr != "127.0.0.1:7201" || opts.HTTPAddr != "127.0.0.1:7102" || opts.DataDir != dir+"/from-config" {
		t.Fatalf("options = amqp %q http %q data %q", opts.AMQPAddr, opts.HTTPAddr, opts.DataDir)
	}
	if opts.Config == nil || opts.Config.Busbar == nil {
		t.Fatal("config file not loaded")
	}

	var g serveFlags
	if err := newServeFlagSet(&g, os.Stderr).Parse([]string{"--amqps", "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.options(nil); err == nil || !strings.Contains(err.Error(), "--amqps needs") {
		t.Fatalf("--amqps without a certificate: err = %v", err)
	}
}

func TestServeUsageErrors(t *testing.T) {
	var stdout, stderr strings.Builder
	if code := run([]string{"serve", "extra"}, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), `unexpected argument "extra"`) {
		t.Fatalf("serve extra: exit %d, stderr %q", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"serve", "--log-level", "loud"}, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), `--log-level "loud"`) {
		t.Fatalf("bad log level: exit %d, stderr %q", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"serve", "--config", "/nonexistent/busbar.json"}, &stdout, &stderr); code != exitError || !strings.Contains(stderr.String(), "no such file") {
		t.Fatalf("missing config: exit %d, stderr %q", code, stderr.String())
	}
}

// TestServeConsolePipelineDB: BUSBAR_CONSOLE_PIPELINE_DB hands the
// console's toolkit the pipelines whose failed jobs are in PostgreSQL; a
// URL without the pipeline's queue is refused before serving.
func TestServeConsolePipelineDB(t *testing.T) {
	t.Setenv("BUSBAR_CONSOLE_PIPELINE_DB", "postgres://db/app?busbar_queue=imports&busbar_table=failures")
	var f serveFlags
	if err := newServeFlagSet(&f, os.Stderr).Parse(nil); err != nil {
		t.Fatal(err)
	}
	opts, err := f.options(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := ops.Toolkit{PipelineDBs: []ops.PipelineDB{{Queue: "imports", DSN: "postgres://db/app", Table: "failures"}}}
	if tk, ok := opts.ConsoleToolkit.(ops.Toolkit); !ok || !reflect.DeepEqual(tk, want) {
		t.Fatalf("console toolkit %#v", opts.ConsoleToolkit)
	}
	var g serveFlags
	if err := newServeFlagSet(&g, os.Stderr).Parse([]string{"--console-pipeline-db", "postgres://db/app"}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.options(nil); err == nil || !strings.Contains(err.Error(), "--console-pipeline-db: postgres://db/app: name the pipeline's work queue") {
		t.Fatalf("a URL without busbar_queue: %v", err)
	}
}

// --commit-linger reaches the store: its default, a value, and 0 for no
// wait (the store's negative; the store's own 0 would mean its default).
func TestServeCommitLinger(t *testing.T) {
	t.Setenv("BUSBAR_COMMIT_LINGER", "")
	for _, c := range []struct {
		args []string
		want time.Duration
	}{
		{nil, pebble.DefaultLinger},
		{[]string{"--commit-linger", "1ms"}, time.Millisecond},
		{[]string{"--commit-linger", "0"}, -1},
	} {
		var f serveFlags
		if err := newServeFlagSet(&f, os.Stderr).Parse(c.args); err != nil {
			t.Fatal(err)
		}
		opts, err := f.options(nil)
		if err != nil {
			t.Fatal(err)
		}
		if opts.CommitLinger != c.want {
			t.Errorf("%v: CommitLinger %v, want %v", c.args, opts.CommitLinger, c.want)
		}
	}
}
