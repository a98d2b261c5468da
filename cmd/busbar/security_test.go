package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"

	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/sas"
	"github.com/busbar-io/busbar/server"
)

// TestTLSVersionsAndCiphers dials the AMQPS listener, configured as
// `busbar serve` configures it, with every protocol version and every
// TLS 1.2 cipher suite Go knows: only TLS 1.2 and 1.3 are accepted, and
// under TLS 1.2 only the ECDHE AEAD suites (the certificate is ECDSA, so
// the ECDSA ones).
func TestTLSVersionsAndCiphers(t *testing.T) {
	dir := t.TempDir()
	cert, _, err := selfSignedCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := serverTLS(cert)
	srv, err := server.Start(context.Background(), server.Options{
		DataDir: dir, AMQPAddr: "127.0.0.1:0", AMQPSAddr: "127.0.0.1:0", HTTPAddr: "-", TLS: cfg,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	addr := srv.AMQPSAddr().String()
	handshake := func(c *tls.Config) error {
		c.InsecureSkipVerify = true // the test checks the protocol, not the certificate
		conn, err := tls.Dial("tcp", addr, c)
		if err != nil {
			return err
		}
		return conn.Close()
	}
	for _, v := range []uint16{tls.VersionTLS10, tls.VersionTLS11, tls.VersionTLS12, tls.VersionTLS13} {
		err := handshake(&tls.Config{MinVersion: v, MaxVersion: v})
		if ok := v >= tls.VersionTLS12; (err == nil) != ok {
			t.Errorf("%s: handshake error %v, want accepted=%v", tls.VersionName(v), err, ok)
		}
	}
	accepted := 0
	for _, s := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		if !slices.Contains(s.SupportedVersions, tls.VersionTLS12) {
			continue
		}
		err := handshake(&tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{s.ID}})
		ok := slices.Contains(cfg.CipherSuites, s.ID) && strings.Contains(s.Name, "_ECDSA_")
		if (err == nil) != ok {
			t.Errorf("TLS 1.2 %s: handshake error %v, want accepted=%v", s.Name, err, ok)
		}
		if err == nil {
			accepted++
		}
	}
	if accepted != 3 {
		t.Errorf("%d TLS 1.2 suites accepted, want the 3 ECDHE-ECDSA AEAD ones", accepted)
	}
}

// TestDataDirectoryPermissions: a data directory Busbar creates is
// private (0700) and its secrets are owner-only (0600) files; nothing in
// it is writable by others. A directory that already exists with a wider
// mode is reported at start.
func TestDataDirectoryPermissions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	srv, err := server.Start(context.Background(), server.Options{DataDir: dir, AMQPAddr: "127.0.0.1:0", HTTPAddr: "-"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := selfSignedCert(dir); err != nil {
		t.Fatal(err)
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mode := func(p string) fs.FileMode {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode().Perm()
	}
	if m := mode(dir); m != 0o700 {
		t.Errorf("data directory mode %v, want 0700", m)
	}
	for _, secret := range []string{"root-key.json", "dev-key.pem"} {
		if m := mode(filepath.Join(dir, secret)); m != 0o600 {
			t.Errorf("%s mode %v, want 0600", secret, m)
		}
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if m := mode(p); m&0o002 != 0 {
			t.Errorf("%s is writable by others (%v)", p, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// An existing directory open to others starts, with a warning.
	open := t.TempDir()
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	srv, err = server.Start(context.Background(), server.Options{DataDir: open, AMQPAddr: "127.0.0.1:0", HTTPAddr: "-",
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	_ = srv.Shutdown(context.Background())
	if !strings.Contains(logs.String(), "data directory is open to other users") {
		t.Errorf("no warning about a data directory of mode 0755; logs:\n%s", logs.String())
	}
}

// lockedBuffer is a log sink written from many goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestNoSecretInLogs runs a whole session against a server assembled as
// `busbar serve` assembles it, logging at debug level in both formats:
// management calls, sends, receives and settlements through the official
// SDKs, and the failures a wrong key, a wrong PLAIN password and a forged
// token cause. No key, password or token signature may appear in the
// logs.
func TestNoSecretInLogs(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var logs lockedBuffer
			log, err := newLogger(&logs, "debug", format)
			if err != nil {
				t.Fatal(err)
			}
			var f serveFlags
			fset := newServeFlagSet(&f, io.Discard)
			if err := fset.Parse([]string{"--data", t.TempDir(), "--amqp", "127.0.0.1:0", "--http", "127.0.0.1:0"}); err != nil {
				t.Fatal(err)
			}
			opts, err := f.options(log)
			if err != nil {
				t.Fatal(err)
			}
			srv, err := server.Start(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			key, _ := srv.RootKey()
			secrets := fullSession(t, srv, key)
			if err := srv.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			out := logs.String()
			// The session was logged: the test would see a leak.
			for _, want := range []string{"put-token", "sasl failed", "attach"} {
				if !strings.Contains(out, want) {
					t.Fatalf("the logs have no %q line; the session was not logged:\n%.2000s", want, out)
				}
			}
			for _, s := range append(secrets, key) {
				if strings.Contains(out, s) {
					t.Errorf("the logs contain the secret %.20q…", s)
				}
			}
			if strings.Contains(out, "sig=") || strings.Contains(out, "sig%3D") {
				t.Error("the logs contain a token signature")
			}
		})
	}
}

// fullSession exercises the server with the official SDKs and returns the
// secrets it used besides the root key.
func fullSession(t *testing.T, srv *server.Server, key string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	amqpAddr, httpAddr := srv.AMQPAddr().String(), srv.HTTPAddr().String()

	ac, err := busbartest.PlainAdminClient(server.ConnectionString(httpAddr, server.RootKeyName, key))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ac.CreateQueue(ctx, "q", nil); err != nil {
		t.Fatal(err)
	}
	c, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(),
		&azservicebus.ClientOptions{RetryOptions: azservicebus.RetryOptions{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	s, err := c.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("hello")}, nil); err != nil {
		t.Fatal(err)
	}
	r, err := c.NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive: %v %v", msgs, err)
	}
	if err := r.CompleteMessage(ctx, msgs[0], nil); err != nil {
		t.Fatal(err)
	}

	// Failures: a wrong key through the SDK, a wrong PLAIN password, a
	// forged token on $cbs, a wrong key on the management API.
	wrongKey := "d3Jvbmcta2V5LXRoYXQtbXVzdC1ub3QtYmUtbG9nZ2Vk"
	bad, err := azservicebus.NewClientFromConnectionString(server.ConnectionString(amqpAddr, server.RootKeyName, wrongKey),
		&azservicebus.ClientOptions{RetryOptions: azservicebus.RetryOptions{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	if bs, err := bad.NewSender("q", nil); err == nil {
		if err := bs.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil); err == nil {
			t.Fatal("a send with a wrong key succeeded")
		}
	}
	_ = bad.Close(ctx)
	password := "plain-password-that-must-not-be-logged"
	if conn, err := goamqp.Dial(ctx, "amqp://"+amqpAddr, &goamqp.ConnOptions{SASLType: goamqp.SASLTypePlain(server.RootKeyName, password)}); err == nil {
		_ = conn.Close()
		t.Fatal("PLAIN with a wrong password was accepted")
	}
	forged := sas.Sign("amqp://"+amqpAddr+"/q", server.RootKeyName, wrongKey, time.Now().Add(time.Hour))
	sig := forged[strings.Index(forged, "sig=")+4:]
	sig = sig[:strings.Index(sig, "&")]
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+"/q?api-version=2021-05", nil)
	req.Header.Set("Authorization", forged)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("forged token on HTTP: %d", resp.StatusCode)
		}
	}
	conn, err := goamqp.Dial(ctx, "amqp://"+amqpAddr, &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sess, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	cbs, err := sess.NewSender(ctx, "$cbs", nil)
	if err != nil {
		t.Fatal(err)
	}
	reply := "$cbs-reply"
	cbsR, err := sess.NewReceiver(ctx, "$cbs", &goamqp.ReceiverOptions{TargetAddress: reply, Credit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := cbs.Send(ctx, &goamqp.Message{
		Properties:            &goamqp.MessageProperties{MessageID: "1", ReplyTo: &reply},
		ApplicationProperties: map[string]any{"operation": "put-token", "type": "servicebus.windows.net:sastoken", "name": "amqp://" + amqpAddr + "/q"},
		Value:                 forged,
	}, nil); err != nil {
		t.Fatal(err)
	}
	if resp, err := cbsR.Receive(ctx, nil); err != nil || resp.ApplicationProperties["status-code"] != int32(401) {
		t.Fatalf("forged put-token: %v %v", resp, err)
	}
	return []string{wrongKey, password, sig}
}
