package server

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/busbar-io/busbar/config"
	"github.com/busbar-io/busbar/sas"
)

// RootKeyName is the name of the namespace-level Manage rule, as in Service Bus.
const RootKeyName = "RootManageSharedAccessKey"

// keyFile is where the generated root key is kept, inside the data directory.
const keyFile = "root-key.json"

type storedKey struct {
	KeyName    string `json:"KeyName"`
	PrimaryKey string `json:"PrimaryKey"`
}

// loadOrCreateRootKey returns the generated root key kept in dataDir,
// generating and saving one (mode 0600) on first start. created reports
// whether it was generated now.
func loadOrCreateRootKey(dataDir string) (key string, created bool, err error) {
	path := filepath.Join(dataDir, keyFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		var k storedKey
		if err := json.Unmarshal(b, &k); err != nil || k.PrimaryKey == "" {
			return "", false, fmt.Errorf("%s is damaged (%v): delete it to generate a new key", path, err)
		}
		return k.PrimaryKey, false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", false, fmt.Errorf("reading %s: %w", path, err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", false, err
	}
	key = base64.StdEncoding.EncodeToString(raw)
	b, _ = json.MarshalIndent(storedKey{KeyName: RootKeyName, PrimaryKey: key}, "", "  ")
	if err := writeDurably(path, append(b, '\n'), 0o600); err != nil {
		return "", false, err
	}
	return key, true, nil
}

// writeDurably writes data to path, whole or not at all, and returns once it
// is on disk: a temporary file, fsynced, renamed over path, and the
// directory fsynced. (The key is printed in the connection string as soon
// as it exists; a power cut must not take it back. The power-loss test in
// crashtest found the version without the fsyncs.)
func writeDurably(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("syncing the directory of %s: %w", path, err)
	}
	return nil
}

// authRules builds the SAS rules: the configured policies when there are any;
// otherwise the generated root key, plus the emulator's well-known key as the
// secondary key when the config is an emulator Config.json.
// rootKey gives the generated root key: loadOrCreateRootKey, or a
// cluster's shared one.
func authRules(cfg *config.File, rootKey func() (string, bool, error)) (rules []sas.Rule, generated string, created bool, err error) {
	if cfg != nil && cfg.Busbar != nil && len(cfg.Busbar.SharedAccessPolicies) > 0 {
		for _, p := range cfg.Busbar.SharedAccessPolicies {
			rights, err := sas.ParseRights(p.Rights)
			if err != nil {
				return nil, "", false, fmt.Errorf("policy %q: %w", p.KeyName, err)
			}
			rules = append(rules, sas.Rule{KeyName: p.KeyName, PrimaryKey: p.PrimaryKey,
				SecondaryKey: p.SecondaryKey, Rights: rights, Entity: p.Entity})
		}
		return rules, "", false, nil
	}
	key, created, err := rootKey()
	if err != nil {
		return nil, "", false, err
	}
	root := sas.Rule{KeyName: RootKeyName, PrimaryKey: key, Rights: sas.Manage | sas.Send | sas.Listen}
	if cfg != nil && cfg.IsEmulatorFile() {
		root.SecondaryKey = config.EmulatorKey
	}
	return []sas.Rule{root}, key, created, nil
}

// ConnectionString returns the emulator-style connection string for a broker
// listening on amqpAddr ("host:port") with the given rule.
func ConnectionString(amqpAddr, keyName, key string) string {
	return fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=%s;SharedAccessKey=%s;UseDevelopmentEmulator=true", amqpAddr, keyName, key)
}
